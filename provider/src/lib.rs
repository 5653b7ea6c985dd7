//! roce-provider: verbs API, datapath and CLI.
pub mod udp;

pub mod bench;
pub mod cli;
pub mod decode;
pub mod entropy;
pub mod ns;
pub mod perfbench;
pub mod runtime;
pub mod shared;
pub mod verbs;
