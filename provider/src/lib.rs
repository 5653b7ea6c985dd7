//! roce-provider: verbs API, datapath and CLI.
