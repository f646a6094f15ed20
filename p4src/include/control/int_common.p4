// INT helpers: packing INT headers into bits (the report clone carries them
// in metadata) and the ones'-complement arithmetic of TCP/UDP checksum
// updates (RFC 1071, RFC 1624) when INT bytes are inserted or removed.

#ifndef __INT_COMMON__
#define __INT_COMMON__

#include "../header.p4"

// INT headers to metadata and back (the report clone gets them as metadata).
int_shim_data_t int_shim_save(in int_shim_t h) {
    int_shim_data_t d;
    d.int_type = h.int_type;
    d.npt      = h.npt;
    d.rsvd1    = h.rsvd1;
    d.len      = h.len;
    d.rsvd2    = h.rsvd2;
    d.dscp     = h.dscp;
    d.rsvd3    = h.rsvd3;
    return d;
}

int_shim_t int_shim_restore(in int_shim_data_t d) {
    int_shim_t h;
    h.setValid();
    h.int_type = d.int_type;
    h.npt      = d.npt;
    h.rsvd1    = d.rsvd1;
    h.len      = d.len;
    h.rsvd2    = d.rsvd2;
    h.dscp     = d.dscp;
    h.rsvd3    = d.rsvd3;
    return h;
}

int_md_data_t int_md_save(in int_md_t h) {
    int_md_data_t d;
    d.ver                = h.ver;
    d.d                  = h.d;
    d.e                  = h.e;
    d.m                  = h.m;
    d.rsvd               = h.rsvd;
    d.hop_ml             = h.hop_ml;
    d.remaining_hop_cnt  = h.remaining_hop_cnt;
    d.instruction_bitmap = h.instruction_bitmap;
    d.domain_id          = h.domain_id;
    d.ds_instruction     = h.ds_instruction;
    d.ds_flags           = h.ds_flags;
    return d;
}

int_md_t int_md_restore(in int_md_data_t d) {
    int_md_t h;
    h.setValid();
    h.ver                = d.ver;
    h.d                  = d.d;
    h.e                  = d.e;
    h.m                  = d.m;
    h.rsvd               = d.rsvd;
    h.hop_ml             = d.hop_ml;
    h.remaining_hop_cnt  = d.remaining_hop_cnt;
    h.instruction_bitmap = d.instruction_bitmap;
    h.domain_id          = d.domain_id;
    h.ds_instruction     = d.ds_instruction;
    h.ds_flags           = d.ds_flags;
    return h;
}

int_hop_data_t int_hop_save(in int_hop_t h) {
    int_hop_data_t d;
    d.switch_id       = h.switch_id;
    d.ingress_port_id = h.ingress_port_id;
    d.egress_port_id  = h.egress_port_id;
    d.hop_latency     = h.hop_latency;
    d.queue_id        = h.queue_id;
    d.queue_occupancy = h.queue_occupancy;
    d.ingress_tstamp  = h.ingress_tstamp;
    d.egress_tstamp   = h.egress_tstamp;
    return d;
}

int_hop_t int_hop_restore(in int_hop_data_t d) {
    int_hop_t h;
    h.setValid();
    h.switch_id       = d.switch_id;
    h.ingress_port_id = d.ingress_port_id;
    h.egress_port_id  = d.egress_port_id;
    h.hop_latency     = d.hop_latency;
    h.queue_id        = d.queue_id;
    h.queue_occupancy = d.queue_occupancy;
    h.ingress_tstamp  = d.ingress_tstamp;
    h.egress_tstamp   = d.egress_tstamp;
    return h;
}

// TCP/UDP checksum updates. INT bytes sit inside what the TCP/UDP checksum
// covers, and so does the L4 length (pseudo header; UDP also has it in its
// own header). With sums taken in ones' complement (RFC 1071), the checksum
// of the packet as it leaves is ~fold(l4_csum_base + l4_words + l4_extra):
//   l4_csum_base  taken once, from the packet as it arrived: the sum its
//                 checksum stands for, less its l4_words (RFC 1624:
//                 subtracting is adding the complement); received hops
//                 stay in it;
//   l4_words      shim + INT-MD header + L4 length as they are now;
//   l4_extra      the hop this switch pushed; at the sink, once the INT
//                 headers are gone, the complement of the hops received.
// Sums are kept unfolded in 32 bits (a few 16-bit words each) and folded by
// the csum16 hash, which returns ~fold(sum of the 16-bit words of its
// input): one primitive, where arithmetic folding would make p4c substitute
// every step into the next and bloat the BMv2 JSON. The sum of the words of
// a 32-bit value v is v mod 0xFFFF, as is v itself (2^16 = 1 mod 0xFFFF).

// ~fold(sum of the 16-bit words of the shim and INT-MD header).
control IntHeadersCsum(inout headers_t hdr, out bit<16> csum) {
    apply {
        hash(csum, HashAlgorithm.csum16, 16w0, { hdr.int_shim, hdr.int_md }, 32w65536);
    }
}

// ~fold(sum of the 16-bit words of a 32-bit value).
control Csum32(in bit<32> value, out bit<16> csum) {
    apply {
        hash(csum, HashAlgorithm.csum16, 16w0, { value }, 32w65536);
    }
}

control IntL4Words(inout headers_t hdr,
                   inout fabric_metadata_t meta) {
    IntHeadersCsum() headers_csum;
    apply {
        meta.int_meta.l4_words = 0;
        if (hdr.int_shim.isValid()) {
            bit<16> c;
            headers_csum.apply(hdr, c);
            meta.int_meta.l4_words = (bit<32>)(~c);
        }
        if (hdr.udp.isValid()) {
            meta.int_meta.l4_words = meta.int_meta.l4_words + (bit<32>)hdr.udp.len + (bit<32>)hdr.udp.len;
        } else if (hdr.ipv4.isValid()) {
            meta.int_meta.l4_words = meta.int_meta.l4_words + (bit<32>)hdr.ipv4.total_len - IPV4_HEADER_BYTES;  // TCP
        } else {
            meta.int_meta.l4_words = meta.int_meta.l4_words + (bit<32>)hdr.ipv6.payload_len;     // TCP right after IPv6
        }
    }
}

// The TCP/UDP checksum of the packet as it is now, into int_meta.l4_csum
// (UDP: a computed 0 is sent as 0xFFFF, RFC 768).
control IntL4Checksum(inout headers_t hdr,
                      inout fabric_metadata_t meta) {
    IntL4Words() l4_words;
    Csum32() csum32;
    apply {
        l4_words.apply(hdr, meta);
        csum32.apply((bit<32>)meta.int_meta.l4_csum_base + meta.int_meta.l4_words
                     + (bit<32>)meta.int_meta.l4_extra, meta.int_meta.l4_csum);
        if (meta.int_meta.l4_csum == 0 && hdr.udp.isValid()) {
            meta.int_meta.l4_csum = 0xFFFF;
        }
    }
}

// IPv4 total length / IPv6 payload length and the UDP length grow by delta
// (two's complement: a removal adds 0 - bytes); int_meta.ip_len follows.
control IntLengths(inout headers_t hdr,
                   inout fabric_metadata_t meta,
                   in bit<16> delta) {
    apply {
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.total_len = hdr.ipv4.total_len + delta;
            meta.int_meta.ip_len = (bit<32>)hdr.ipv4.total_len;
        } else {
            hdr.ipv6.payload_len = hdr.ipv6.payload_len + delta;
            meta.int_meta.ip_len = IPV6_HEADER_BYTES + (bit<32>)hdr.ipv6.payload_len;
        }
        if (hdr.udp.isValid()) {
            hdr.udp.len = hdr.udp.len + delta;
        }
    }
}

#endif  // __INT_COMMON__
