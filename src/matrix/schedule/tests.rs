use super::*;
use crate::matrix::Matrix;
use crate::verdict::Signature;

fn matrix() -> Matrix {
    crate::matrix::tests::build(
        r#"
[base]
command = ["x"]
[[axis]]
env = "GPU"
values = ["a", "b"]
[[axis]]
arg = "--mem"
values = ["0.8", "0.9", "0.95"]
ordered = true
stop_on = ["cuda_oom"]
"#,
    )
    .unwrap()
}

fn rows(m: &Matrix) -> Vec<CellRow> {
    m.cells
        .iter()
        .map(|c| CellRow {
            index: c.index,
            label: c.label.clone(),
            values: c.values.clone(),
            state: CellState::Pending,
            runs: vec![],
        })
        .collect()
}

fn result(verdict: Verdict, signature: Option<Signature>) -> RunResult {
    RunResult {
        run_id: "r".into(),
        verdict,
        signature,
        phase: None,
        ready_s: None,
        elapsed_s: 1.0,
        line: None,
        metrics: Default::default(),
        bench_problem: None,
        teardown: "clean".into(),
        clean: true,
        resumed: false,
        job: None,
    }
}

fn finish(r: &mut CellRow, verdict: Verdict, signature: Option<Signature>) {
    r.runs.push(result(verdict, signature));
    r.state = CellState::Done;
}

#[test]
fn cells_along_an_ordered_axis_wait_then_stop_at_the_named_cause() {
    let m = matrix();
    let pre = m.predecessors();
    let mut r = rows(&m);
    // a/0.8 first; a/0.9 must wait for it, so the next free cell is b/0.8 (index 3).
    assert_eq!(pick(&m.axes, &pre, &mut r, None, false), Next::Run(0, 0));
    r[0].state = CellState::Running { phase: None };
    assert_eq!(pick(&m.axes, &pre, &mut r, None, false), Next::Run(3, 0));
    r[3].state = CellState::Running { phase: None };
    assert_eq!(pick(&m.axes, &pre, &mut r, None, false), Next::Wait);
    // a/0.8 is ready: a/0.9 may run.
    finish(&mut r[0], Verdict::Ready, None);
    assert_eq!(pick(&m.axes, &pre, &mut r, None, false), Next::Run(1, 0));
    r[1].state = CellState::Running { phase: None };
    // b/0.8 stalls: not a stop_on cause, so b/0.9 still runs.
    finish(&mut r[3], Verdict::Stalled, None);
    assert_eq!(pick(&m.axes, &pre, &mut r, None, false), Next::Run(4, 0));
    r[4].state = CellState::Running { phase: None };
    // a/0.9 runs out of memory: a/0.95 is skipped, naming where and why.
    finish(&mut r[1], Verdict::Failed, Some(Signature::CudaOom));
    assert_eq!(pick(&m.axes, &pre, &mut r, None, false), Next::Wait);
    assert_eq!(
        r[2].state,
        CellState::Skipped {
            reason: "not run: mem stopped at 0.9 (cuda_oom)".into()
        }
    );
    finish(&mut r[4], Verdict::Ready, None);
    assert_eq!(pick(&m.axes, &pre, &mut r, None, false), Next::Run(5, 0));
    finish(&mut r[5], Verdict::Ready, None);
    assert_eq!(pick(&m.axes, &pre, &mut r, None, false), Next::Done);
}

#[test]
fn a_stop_reason_or_ctrl_c_skips_every_pending_cell() {
    let m = matrix();
    let pre = m.predecessors();
    let table: [(Option<&str>, bool, &str); 2] = [
        (
            Some("not run: --fail-fast after cell 1 (failed)"),
            false,
            "not run: --fail-fast after cell 1 (failed)",
        ),
        (None, true, "not run: interrupted (Ctrl-C)"),
    ];
    for (stop, cancel, want) in table {
        let mut r = rows(&m);
        finish(&mut r[0], Verdict::Failed, Some(Signature::CudaError));
        r[3].state = CellState::Running { phase: None };
        assert_eq!(pick(&m.axes, &pre, &mut r, stop, cancel), Next::Wait);
        for i in [1, 2, 4, 5] {
            assert_eq!(
                r[i].state,
                CellState::Skipped {
                    reason: want.into()
                },
                "cell {i}"
            );
        }
        r[3].state = CellState::Done;
        assert_eq!(pick(&m.axes, &pre, &mut r, stop, cancel), Next::Done);
    }
}

#[test]
fn repeats_come_back_to_the_same_cell_with_their_index() {
    let m = matrix();
    let pre = m.predecessors();
    let mut r = rows(&m);
    r[0].runs.push(result(Verdict::Ready, None));
    assert_eq!(pick(&m.axes, &pre, &mut r, None, false), Next::Run(0, 1));
}

#[test]
fn stop_on_defaults_to_anything_but_ready() {
    let table = [
        (vec![], Verdict::Ready, None, None),
        (vec![], Verdict::Stalled, None, Some("stalled")),
        (
            vec![],
            Verdict::Failed,
            Some(Signature::CudaOom),
            Some("cuda_oom"),
        ),
        (vec!["cuda_oom".to_string()], Verdict::Stalled, None, None),
        (
            vec!["stalled".to_string()],
            Verdict::Stalled,
            None,
            Some("stalled"),
        ),
    ];
    for (stop_on, v, sig, want) in table {
        assert_eq!(
            stops_axis(&stop_on, &[result(v, sig)]).as_deref(),
            want,
            "{stop_on:?} {v}"
        );
    }
}
