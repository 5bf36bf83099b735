//! The judge's unit tests get their classifiers here, built once per test process (issue 28):
//! the catalog is parsed once, and a classifier is compiled on the first call with its spec;
//! later calls with the same spec get a clone (the compiled sets are shared, the lazy caches are
//! each clone's own). The tests run on several threads, hence the lock.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use crate::classify::{CatalogFile, Classifier, ClassifierSpec, PatternError, builtin_catalog};

/// The built-in catalog, parsed once.
pub(crate) fn catalog() -> &'static CatalogFile {
    static CATALOG: OnceLock<CatalogFile> = OnceLock::new();
    CATALOG.get_or_init(builtin_catalog)
}

/// [`Classifier::new`] of `spec`, compiled once per distinct spec in this process.
pub(crate) fn classifier(spec: &ClassifierSpec) -> Result<Classifier, PatternError> {
    static BUILT: OnceLock<Mutex<HashMap<String, Classifier>>> = OnceLock::new();
    let built = BUILT.get_or_init(Default::default);
    let key = format!("{spec:?}");
    let cached = built
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&key)
        .cloned();
    if let Some(c) = cached {
        return Ok(c);
    }
    // Compiled outside the lock: two threads may both build the first one; either is kept.
    let c = Classifier::new(spec)?;
    built
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, c.clone());
    Ok(c)
}
