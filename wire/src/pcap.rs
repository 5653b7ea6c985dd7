//! pcap (todo)
