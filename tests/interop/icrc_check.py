#!/usr/bin/env python3
"""Independent ICRC check of a lab capture (stdlib only).

Reads a classic pcap (Ethernet link type), takes every IPv4 or IPv6 frame to UDP port 4791 and
recomputes the RoCEv2 invariant CRC the way kernel rxe does (rxe_icrc.c): CRC-32 over 8 bytes
of 0xFF (masked LRH), the IP header with TOS/TTL/checksum (IPv4) or traffic class/flow
label/hop limit (IPv6) set to all ones, the UDP header with checksum 0xFFFF, the BTH with
byte 4 (FECN/BECN/resv) set to 0xFF, then the rest of the packet up to the ICRC, which is
stored little-endian. Prints a one-line summary; exits 1 if any ICRC is wrong or truncated.
A cross-check for `roce decode`, not a replacement.
"""
import struct
import sys
import zlib
from collections import Counter


def frames(path):
    with open(path, "rb") as f:
        hdr = f.read(24)
        magic = struct.unpack("<I", hdr[:4])[0]
        endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
        if struct.unpack(endian + "I", hdr[20:24])[0] != 1:
            sys.exit("not an Ethernet capture")
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            _, _, incl, orig = struct.unpack(endian + "IIII", rec)
            yield f.read(incl), orig


def roce_payload(frame):
    """(masked IP+UDP header bytes, bytes from BTH to end of UDP payload) or None."""
    off, etype = 14, struct.unpack("!H", frame[12:14])[0]
    if etype == 0x8100:
        off, etype = 18, struct.unpack("!H", frame[16:18])[0]
    if etype == 0x0800:
        ihl = (frame[off] & 0x0F) * 4
        if frame[off + 9] != 17:
            return None
        ip = bytearray(frame[off:off + ihl])
        ip[1] = 0xFF                 # TOS
        ip[8] = 0xFF                 # TTL
        ip[10:12] = b"\xff\xff"      # header checksum
    elif etype == 0x86DD:
        ihl = 40
        if frame[off + 6] != 17:
            return None
        ip = bytearray(frame[off:off + 40])
        ip[0:4] = bytes([ip[0] | 0x0F, 0xFF, 0xFF, 0xFF])   # traffic class, flow label
        ip[7] = 0xFF                 # hop limit
    else:
        return None
    udp = bytearray(frame[off + ihl:off + ihl + 8])
    if len(udp) < 8 or struct.unpack("!H", udp[2:4])[0] != 4791:
        return None
    ulen = struct.unpack("!H", udp[4:6])[0]
    udp[6:8] = b"\xff\xff"
    body = frame[off + ihl + 8:off + ihl + ulen]
    return bytes(ip) + bytes(udp), body, ulen - 8


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: icrc_check.py CAPTURE.pcap")
    total = bad = short = 0
    ops = Counter()
    for frame, orig in frames(sys.argv[1]):
        r = roce_payload(frame)
        if r is None:
            continue
        hdrs, body, want_len = r
        total += 1
        if len(body) < want_len or len(body) < 16:
            short += 1
            continue
        bth = bytearray(body[:12])
        bth[4] = 0xFF
        crc = zlib.crc32(b"\xff" * 8 + hdrs + bytes(bth) + body[12:-4]) & 0xFFFFFFFF
        ops[body[0]] += 1
        if crc != struct.unpack("<I", body[-4:])[0]:
            bad += 1
    top = ", ".join(f"0x{op:02x}:{n}" for op, n in ops.most_common(8))
    print(f"icrc_check: {total} RoCEv2 packets, {bad} ICRC errors, {short} truncated; opcodes {top}")
    sys.exit(1 if bad or short or total == 0 else 0)


if __name__ == "__main__":
    main()
