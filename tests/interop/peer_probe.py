#!/usr/bin/env python3
"""Send hand-built RoCEv2 frames from a host-peer namespace to a guest's kernel rxe.

Run inside the namespace made by `lab.sh hostjoin` (`lab.sh host python3 peer_probe.py ...`).
It sends UD SEND_ONLY packets to the guest's QP1 (GSI, Q_Key 0x80010000) carrying a zero
256-byte MAD, some with a correct ICRC and some with a corrupted one, over AF_PACKET so every
header byte (including the IPv4 ID, which the ICRC covers) is ours. Comparing the guest's
`rdma statistic` before and after shows what rxe accepted; its kernel log shows ICRC drops.
This proves the host-peer path a userspace RoCEv2 emulator will use.

usage: peer_probe.py --dst 198.18.0.2 [--src 198.18.0.10] [--good N] [--bad N] [--iface eth0]
"""
import argparse
import socket
import struct
import zlib


def ifaddr_mac(iface):
    with open(f"/sys/class/net/{iface}/address") as f:
        return bytes.fromhex(f.read().strip().replace(":", ""))


def lab_mac(ip):
    """The lab's deterministic guest MAC: 52:54:00:18:00:<last octet>."""
    return bytes([0x52, 0x54, 0x00, 0x18, 0x00, int(ip.split(".")[-1])])


def ipv4_checksum(hdr):
    s = sum(struct.unpack("!10H", hdr))
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def icrc(ip, udp, bth, rest):
    """rxe's ICRC: CRC-32 over 0xFF*8 | IP/UDP/BTH with variant fields set to ones | rest."""
    ip, udp, bth = bytearray(ip), bytearray(udp), bytearray(bth)
    ip[1], ip[8], ip[10:12] = 0xFF, 0xFF, b"\xff\xff"
    udp[6:8] = b"\xff\xff"
    bth[4] = 0xFF
    return zlib.crc32(b"\xff" * 8 + ip + udp + bth + rest) & 0xFFFFFFFF


def frame(src_mac, dst_mac, src, dst, ip_id, psn, corrupt):
    bth = struct.pack("!BBHII", 0x64, 0, 0xFFFF, 1, psn & 0xFFFFFF)  # UD SEND_ONLY to QP1
    deth = struct.pack("!II", 0x80010000, 1)                          # GSI Q_Key, src QP 1
    payload = bytes(256)                                              # an all-zero MAD
    udp_len = 8 + len(bth) + len(deth) + len(payload) + 4
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, ip_id, 0x4000, 64, 17, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))
    ip = ip[:10] + struct.pack("!H", ipv4_checksum(ip)) + ip[12:]
    udp = struct.pack("!HHHH", 0xC001, 4791, udp_len, 0)
    crc = icrc(ip, udp, bth, deth + payload) ^ (0xDEADBEEF if corrupt else 0)
    return dst_mac + src_mac + b"\x08\x00" + ip + udp + bth + deth + payload + struct.pack("<I", crc)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dst", required=True)
    ap.add_argument("--src", default="198.18.0.10")
    ap.add_argument("--iface", default="eth0")
    ap.add_argument("--good", type=int, default=10)
    ap.add_argument("--bad", type=int, default=10)
    a = ap.parse_args()
    for addr in (a.src, a.dst):
        if not addr.startswith("198.18.0."):
            raise SystemExit(f"{addr} is outside 198.18.0.0/24")
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((a.iface, 0))
    src_mac, dst_mac = ifaddr_mac(a.iface), lab_mac(a.dst)
    n = 0
    for corrupt, count in ((False, a.good), (True, a.bad)):
        for _ in range(count):
            s.send(frame(src_mac, dst_mac, a.src, a.dst, 0x1000 + n, n, corrupt))
            n += 1
    print(f"peer_probe: sent {a.good} good and {a.bad} bad-ICRC UD packets to {a.dst} QP1")


if __name__ == "__main__":
    main()
