// hashes: v1model hash() with every deterministic HashAlgorithm over the same
// fields, written to header `hsh` (ethertype 0x88B5) for bit-exact
// comparison with BMv2. crc16_custom / crc32_custom use the target's default
// parameters (P4Runtime cannot change them). `random` is skipped.
//
//   D1 = { f9, f7, f32, f16 }        64 bits, fields not byte-aligned
//   D2 = { f9, f32 }                 41 bits, not a whole number of bytes
//   <algo>_a = hash(D1, base 0, max 2^16)    (bit<32> output)
//   <algo>_b = hash(D1, base 5, max 1000)    (bit<32> output)
//   <algo>_c = hash(D2, base 0, max 2^32)    (bit<32> output)
//   crc32_16 = hash(D1, crc32, base 0, max 2^32) into a bit<16> output (truncated)
//
// Forwarding: fwd (exact ingress_port -> set_port(port)); default drop.
#include <core.p4>
#include <v1model.p4>

const bit<16> ETHERTYPE_HSH = 0x88B5;

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header hsh_t {
    // inputs
    bit<9>  f9;
    bit<7>  f7;
    bit<32> f32;
    bit<16> f16;
    // outputs
    bit<32> crc16_a;
    bit<32> crc16_b;
    bit<32> crc16_c;
    bit<32> crc32_a;
    bit<32> crc32_b;
    bit<32> crc32_c;
    bit<32> crc16_custom_a;
    bit<32> crc16_custom_b;
    bit<32> crc16_custom_c;
    bit<32> crc32_custom_a;
    bit<32> crc32_custom_b;
    bit<32> crc32_custom_c;
    bit<32> csum16_a;
    bit<32> csum16_b;
    bit<32> csum16_c;
    bit<32> identity_a;
    bit<32> identity_b;
    bit<32> identity_c;
    bit<32> xor16_a;
    bit<32> xor16_b;
    bit<32> xor16_c;
    bit<16> crc32_16;
}

struct headers_t {
    ethernet_t ethernet;
    hsh_t      hsh;
}

struct metadata_t { }

parser HashParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_HSH: parse_hsh;
            default: accept;
        }
    }
    state parse_hsh {
        packet.extract(hdr.hsh);
        transition accept;
    }
}

control HashVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

#define HASH3(ALGO)                                                           \
    hash(hdr.hsh.ALGO##_a, HashAlgorithm.ALGO, 32w0,                          \
         { hdr.hsh.f9, hdr.hsh.f7, hdr.hsh.f32, hdr.hsh.f16 }, 32w65536);     \
    hash(hdr.hsh.ALGO##_b, HashAlgorithm.ALGO, 32w5,                          \
         { hdr.hsh.f9, hdr.hsh.f7, hdr.hsh.f32, hdr.hsh.f16 }, 32w1000);      \
    hash(hdr.hsh.ALGO##_c, HashAlgorithm.ALGO, 32w0,                          \
         { hdr.hsh.f9, hdr.hsh.f32 }, 64w0x100000000);

control HashIngress(inout headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    action drop() {
        mark_to_drop(standard_metadata);
    }

    action set_port(bit<9> port) {
        standard_metadata.egress_spec = port;
    }

    // fwd: exact ingress_port -> set_port(port); default drop.
    table fwd {
        key = { standard_metadata.ingress_port: exact; }
        actions = { set_port; drop; }
        default_action = drop();
    }

    apply {
        fwd.apply();
        if (hdr.hsh.isValid()) {
            HASH3(crc16)
            HASH3(crc32)
            HASH3(crc16_custom)
            HASH3(crc32_custom)
            HASH3(csum16)
            HASH3(identity)
            HASH3(xor16)
            hash(hdr.hsh.crc32_16, HashAlgorithm.crc32, 32w0,
                 { hdr.hsh.f9, hdr.hsh.f7, hdr.hsh.f32, hdr.hsh.f16 }, 64w0x100000000);
        }
    }
}

control HashEgress(inout headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    apply { }
}

control HashComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control HashDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.hsh);
    }
}

V1Switch(HashParser(), HashVerifyChecksum(), HashIngress(), HashEgress(),
         HashComputeChecksum(), HashDeparser()) main;
