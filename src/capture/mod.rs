//! pcap/pcapng reading and TCP reassembly.
