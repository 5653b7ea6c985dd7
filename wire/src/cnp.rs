//! Congestion Notification Packet (opcode 0x81): BTH with BECN set, 16 reserved bytes, ICRC.
//!
//! Format as a ConnectX-4 Lx sends it (roce-spec-notes §D): P_Key 0xFFFF, byte 4 = 0x40 (BECN),
//! DestQP = the QP of the flow's sender, A = 0, PSN = 0, 16 zero bytes.
use crate::opcode::Opcode;
use crate::{bth, transport, Psn};

/// Length of a CNP from BTH to ICRC inclusive.
pub const PACKET_LEN: usize = bth::HEADER_LEN + 16 + crate::ICRC_LEN;

/// The transport `Repr` of a CNP aimed at `dest_qp`.
pub fn repr(dest_qp: u32) -> transport::Repr {
    let mut b = bth::Repr::new(Opcode::CNP, dest_qp, Psn::new(0));
    b.becn = true;
    let mut r = transport::Repr::new(b);
    r.cnp_reserved = Some([0; 16]);
    r
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn matches_connectx_capture() {
        let r = repr(0x118);
        assert_eq!(r.buffer_len(), PACKET_LEN);
        let mut b = [0u8; PACKET_LEN];
        r.emit(&mut transport::Packet::new_unchecked(&mut b[..]));
        assert_eq!(
            &b[..12],
            &[0x81, 0x00, 0xff, 0xff, 0x40, 0x00, 0x01, 0x18, 0, 0, 0, 0]
        );
        assert!(b[12..28].iter().all(|&x| x == 0));
    }
}
