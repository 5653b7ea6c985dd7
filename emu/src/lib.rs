//! roce-emu: the sans-IO NIC core (in progress).
