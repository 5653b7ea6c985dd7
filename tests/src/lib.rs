//! Helpers shared by the integration tests.

pub mod captures;
pub mod debian;
pub mod perftest;
pub mod prereq;
