//! What the real captures (shared `captures/real`, described in its SOURCES.md) must decode
//! to: per-file RoCE packet counts, RoCEv1 counts, ICRC verdict class and BTH opcode
//! histogram. The numbers are the SOURCES.md summary and histogram tables; the capture files
//! themselves are not part of this repository.

/// What the ICRCs of a file must look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icrc {
    /// Every packet complete and valid.
    AllValid,
    /// Every packet complete and invalid (UDP source port rewritten by the capture path).
    AllInvalid,
    /// This many truncated packets (snap length); every complete one invalid.
    TruncatedRestInvalid(u64),
}

/// Expected decoding of one capture file.
#[derive(Debug, Clone, Copy)]
pub struct Expected {
    /// File name in the captures directory.
    pub file: &'static str,
    /// RoCE packets (v1 + v2).
    pub roce: u64,
    /// RoCEv1 packets among them.
    pub v1: u64,
    /// ICRC verdicts.
    pub icrc: Icrc,
    /// `(opcode, packets)`, ascending by opcode.
    pub opcodes: &'static [(u8, u64)],
    /// Extra `tshark -d` decode-as rules needed for Wireshark to see every RoCE packet.
    pub tshark_decode_as: &'static [&'static str],
}

const SEND_MIX: [u8; 4] = [0x00, 0x01, 0x02, 0x11];

macro_rules! mix {
    ($a:expr, $b:expr, $c:expr, $d:expr) => {
        &[
            (SEND_MIX[0], $a),
            (SEND_MIX[1], $b),
            (SEND_MIX[2], $c),
            (SEND_MIX[3], $d),
        ]
    };
}

const RXE_MIX: &[(u8, u64)] = &[
    (0x0a, 1),
    (0x0c, 1),
    (0x0d, 1),
    (0x0e, 2),
    (0x0f, 1),
    (0x11, 1),
    (0x64, 5),
];

/// The 20 captures of SOURCES.md, in its table order.
pub const EXPECTED: &[Expected] = &[
    Expected {
        file: "mlx5_rocev1__magnate3__mellanox-doc-rocev1.pcap",
        roce: 2468,
        v1: 2468,
        icrc: Icrc::AllValid,
        opcodes: mix!(352, 1023, 556, 537),
        tshark_decode_as: &[],
    },
    Expected {
        file: "mlx5_rocev1v2mix__magnate3__mellanox-doc-rocev1_test.pcap",
        roce: 624,
        v1: 323,
        icrc: Icrc::AllValid,
        opcodes: mix!(125, 232, 138, 129),
        tshark_decode_as: &[],
    },
    Expected {
        file: "mlx5_rocev2__magnate3__mellanox-doc-rocev2_test.pcap",
        roce: 708,
        v1: 0,
        icrc: Icrc::AllValid,
        opcodes: mix!(120, 265, 148, 175),
        tshark_decode_as: &[],
    },
    Expected {
        file: "mlx5_rocev2__magnate3__mellanox-doc-rocev2-2_test.pcap",
        roce: 641,
        v1: 0,
        icrc: Icrc::AllValid,
        opcodes: mix!(129, 236, 117, 159),
        tshark_decode_as: &[],
    },
    Expected {
        file: "mlx5_rocev2__magnate3__mellanox-doc-ib_send_bw_over_roce.pcap",
        roce: 10,
        v1: 0,
        icrc: Icrc::AllValid,
        opcodes: &[(0x04, 5), (0x11, 5)],
        tshark_decode_as: &[],
    },
    Expected {
        file: "mlx5_rocev2__magnate3__02-2-write-ibdump-write.pcap",
        roce: 17,
        v1: 0,
        icrc: Icrc::AllValid,
        opcodes: &[(0x04, 4), (0x0a, 2), (0x11, 6), (0x64, 5)],
        tshark_decode_as: &[],
    },
    Expected {
        file: "mlx5_rocev2__magnate3__rdma-write-read-ibdump-read2.pcap",
        roce: 13,
        v1: 0,
        icrc: Icrc::AllValid,
        opcodes: &[
            (0x04, 2),
            (0x0a, 1),
            (0x0c, 1),
            (0x10, 1),
            (0x11, 3),
            (0x64, 5),
        ],
        tshark_decode_as: &[],
    },
    Expected {
        file: "mlx5_rocev2__magnate3__send_recv-ibdump-send.pcap",
        roce: 9,
        v1: 0,
        icrc: Icrc::AllValid,
        opcodes: &[(0x04, 2), (0x11, 2), (0x64, 5)],
        tshark_decode_as: &[],
    },
    Expected {
        file: "mlx5_rocev2_nvmeof__magnate3__nvme-discover.pcap",
        roce: 61,
        v1: 0,
        icrc: Icrc::AllValid,
        opcodes: &[
            (0x04, 22),
            (0x06, 2),
            (0x07, 2),
            (0x08, 2),
            (0x0a, 1),
            (0x0c, 1),
            (0x10, 1),
            (0x11, 25),
            (0x64, 5),
        ],
        tshark_decode_as: &[],
    },
    Expected {
        file: "mlx5_rocev2_nvmeof__magnate3__nvme-discover2.pcap",
        roce: 31,
        v1: 0,
        icrc: Icrc::AllValid,
        opcodes: &[(0x04, 12), (0x0c, 1), (0x10, 1), (0x11, 12), (0x64, 5)],
        tshark_decode_as: &[],
    },
    Expected {
        file: "mlx5_rocev2_nvmeof__magnate3__nvme-rdma-25echoTo27.pcap",
        roce: 45,
        v1: 0,
        icrc: Icrc::AllValid,
        opcodes: &[(0x00, 2), (0x01, 3), (0x02, 2), (0x04, 18), (0x11, 20)],
        tshark_decode_as: &[],
    },
    Expected {
        file: "mlx5_rocev2_nvmeof__magnate3__nvme-rdma-idle.pcap",
        roce: 4,
        v1: 0,
        icrc: Icrc::AllValid,
        opcodes: &[(0x04, 2), (0x11, 2)],
        tshark_decode_as: &[],
    },
    Expected {
        file: "mlx5_sportrewritten__magnate3__dc-rc-small.pcap",
        roce: 21,
        v1: 0,
        icrc: Icrc::AllInvalid,
        opcodes: &[(0x0a, 16), (0x11, 5)],
        tshark_decode_as: &[],
    },
    Expected {
        file: "mlx5_sportrewritten__magnate3__dc-dc-small.pcap",
        roce: 19,
        v1: 0,
        icrc: Icrc::AllInvalid,
        opcodes: &[(0x4a, 12), (0x51, 7)],
        tshark_decode_as: &[],
    },
    Expected {
        file: "mlx5_sportrewritten__magnate3__dc-dc-small2.pcap",
        roce: 29,
        v1: 0,
        icrc: Icrc::AllInvalid,
        opcodes: &[(0x46, 1), (0x47, 25), (0x51, 2), (0x55, 1)],
        tshark_decode_as: &[],
    },
    Expected {
        file: "mlx5_sportrewritten__magnate3__uc-sg.pcap",
        roce: 17,
        v1: 0,
        icrc: Icrc::AllInvalid,
        opcodes: &[(0x20, 9), (0x22, 8)],
        tshark_decode_as: &[],
    },
    Expected {
        file: "mlx5_sportrewritten_snaplen__magnate3__uccl-rdma-nccl2.pcap",
        roce: 509,
        v1: 0,
        icrc: Icrc::TruncatedRestInvalid(489),
        opcodes: &[
            (0x0a, 1),
            (0x11, 1),
            (0x26, 31),
            (0x27, 427),
            (0x29, 31),
            (0x65, 18),
        ],
        tshark_decode_as: &[],
    },
    Expected {
        file: "huawei_rocev2__oferby-proxy__roce.pcap",
        roce: 105,
        v1: 0,
        icrc: Icrc::AllValid,
        opcodes: &[(0x00, 33), (0x03, 33), (0x05, 2), (0x11, 37)],
        tshark_decode_as: &["udp.port==69,infiniband", "udp.port==72,infiniband"],
    },
    Expected {
        file: "rxe_rocev2__montybeatnik__roce_capture_read-write-ecn.pcap",
        roce: 12,
        v1: 0,
        icrc: Icrc::AllValid,
        opcodes: RXE_MIX,
        tshark_decode_as: &[],
    },
    Expected {
        file: "rxe_rocev2__montybeatnik__test.pcap",
        roce: 12,
        v1: 0,
        icrc: Icrc::AllValid,
        opcodes: RXE_MIX,
        tshark_decode_as: &[],
    },
];

/// `(file, opcode, reason, packets)` of the real packets whose transport headers do not
/// parse with `transport::Repr::parse`, in file order. All are ConnectX DC packets: DC reuses
/// the RD opcode space with another header layout. The DC ACKs (0x51, RD ACKNOWLEDGE: RDETH +
/// AETH, no payload) carry 16 more bytes, and 0x55 (RD RESYNC, no payload) carries 24, so
/// the no-payload length check refuses them.
pub const EXPECTED_PARSE_FAILURES: &[(&str, u8, roce_wire::Error, u64)] = &[
    (
        "mlx5_sportrewritten__magnate3__dc-dc-small.pcap",
        0x51,
        roce_wire::Error::BadLength,
        7,
    ),
    (
        "mlx5_sportrewritten__magnate3__dc-dc-small2.pcap",
        0x51,
        roce_wire::Error::BadLength,
        2,
    ),
    (
        "mlx5_sportrewritten__magnate3__dc-dc-small2.pcap",
        0x55,
        roce_wire::Error::BadLength,
        1,
    ),
];
