//! Raw UDP baseline (todo).
