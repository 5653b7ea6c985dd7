//! [`QueuePairEndpoint`]: what a peer needs to connect (QPN, PSN, GID, LID), with its byte and JSON
//! encodings.

use super::*;

/// What a peer needs to connect to a queue pair (exchange it out of band, see
/// [`super::exchange`]): QP number, first PSN, GID (RoCEv2: the IP address) and LID (always 0
/// on RoCE, kept for the `ibverbs` shape).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct QueuePairEndpoint {
    /// QP number.
    pub qpn: u32,
    /// The first PSN this QP sends with (the peer expects it).
    pub psn: u32,
    /// GID (`::ffff:a.b.c.d` for an IPv4 device).
    pub gid: Gid,
    /// LID (0 on RoCE).
    pub lid: u16,
}

impl QueuePairEndpoint {
    /// Encoded length of [`QueuePairEndpoint::to_bytes`].
    pub const BYTES: usize = 26;

    /// Fixed 26-byte big-endian encoding: qpn (4), psn (4), lid (2), gid (16).
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        b[0..4].copy_from_slice(&self.qpn.to_be_bytes());
        b[4..8].copy_from_slice(&self.psn.to_be_bytes());
        b[8..10].copy_from_slice(&self.lid.to_be_bytes());
        b[10..26].copy_from_slice(&self.gid);
        b
    }

    /// Decodes [`QueuePairEndpoint::to_bytes`].
    pub fn from_bytes(b: &[u8]) -> Result<QueuePairEndpoint> {
        if b.len() != Self::BYTES {
            return Err(Error::Decode(format!(
                "expected {} bytes, got {}",
                Self::BYTES,
                b.len()
            )));
        }
        let qpn = u32::from_be_bytes(b[0..4].try_into().expect("4"));
        let psn = u32::from_be_bytes(b[4..8].try_into().expect("4"));
        if qpn >= 1 << 24 || psn >= 1 << 24 {
            return Err(Error::Decode("QPN and PSN are 24-bit values".into()));
        }
        Ok(QueuePairEndpoint {
            qpn,
            psn,
            lid: u16::from_be_bytes(b[8..10].try_into().expect("2")),
            gid: b[10..26].try_into().expect("16"),
        })
    }

    /// JSON, e.g. `{"qpn":17,"psn":1234,"gid":[0,…],"lid":0}`.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("endpoint serialises")
    }

    /// Decodes [`QueuePairEndpoint::to_json`].
    pub fn from_json(s: &str) -> Result<QueuePairEndpoint> {
        serde_json::from_str(s).map_err(|e| Error::Decode(e.to_string()))
    }

    /// The peer's IP address (from the GID).
    pub fn ip(&self) -> std::net::IpAddr {
        roce_emu::ip_from_gid(&self.gid)
    }
}
