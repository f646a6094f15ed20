// varbit_checksum: a varbit field as a checksum and a hash input, packed at its current
// width as BMv2 packs it. Frame: Ethernet (88B5), then info (n, csum, crc), n bytes of
// data (a varbit), one tail byte. Out of port 1 with
//   info.crc  = crc32 of {info.n, data.v, tail.x}   (the hash extern: the input's bytes)
//   info.csum = csum16 of {info.n, data.v, tail.x}  (update_checksum: the csum16 path)
// An odd n moves tail.x to the other byte of a 16-bit word.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header info_t { bit<8> n; bit<16> csum; bit<32> crc; }
header data_t { varbit<64> v; }
header tail_t { bit<8> x; }
struct headers_t { ethernet_t ethernet; info_t info; data_t data; tail_t tail; }
struct metadata_t { }

parser VarbitParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        packet.extract(hdr.info);
        packet.extract(hdr.data, (bit<32>)hdr.info.n * 8);
        packet.extract(hdr.tail);
        transition accept;
    }
}

control VarbitVerifyChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }

control VarbitIngress(inout headers_t hdr, inout metadata_t meta,
                      inout standard_metadata_t standard_metadata) {
    apply {
        hash(hdr.info.crc, HashAlgorithm.crc32, 32w0, { hdr.info.n, hdr.data.v, hdr.tail.x },
             64w0x100000000);
        standard_metadata.egress_spec = 1;
    }
}

control VarbitEgress(inout headers_t hdr, inout metadata_t meta,
                     inout standard_metadata_t standard_metadata) { apply { } }

control VarbitComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(true, { hdr.info.n, hdr.data.v, hdr.tail.x }, hdr.info.csum,
                        HashAlgorithm.csum16);
    }
}

control VarbitDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.info);
        packet.emit(hdr.data);
        packet.emit(hdr.tail);
    }
}

V1Switch(VarbitParser(), VarbitVerifyChecksum(), VarbitIngress(), VarbitEgress(),
         VarbitComputeChecksum(), VarbitDeparser()) main;
