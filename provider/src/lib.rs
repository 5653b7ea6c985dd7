//! roce-provider: verbs API, datapath and CLI.
pub mod udp;

pub mod decode;
pub mod runtime;
pub mod verbs;
pub mod cli;
pub mod bench;
pub mod perfbench;
