//! The `firedup` binary: everything lives in the library; see `firedup --help`.

fn main() {
    std::process::exit(firedup::cli::main());
}
