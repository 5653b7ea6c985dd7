//! Helpers shared by the integration tests.

pub mod captures;
pub mod perftest;
pub mod prereq;
