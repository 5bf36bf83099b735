//! Judge tests.
