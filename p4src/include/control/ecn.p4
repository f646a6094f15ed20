// ECN marking in egress: DCQCN-style RED on the egress queue depth seen at
// enqueue (standard_metadata.enq_qdepth, packets: the depth of the queue the
// packet entered, which is its traffic class's own on both targets).

#ifndef __ECN__
#define __ECN__

#include "../header.p4"

control Ecn(inout headers_t hdr,
            inout fabric_metadata_t meta,
            inout standard_metadata_t standard_metadata) {

    // ecn_marked: packets marked CE here, per egress port (indexed by
    // standard_metadata.egress_port). Packets that arrive CE already are not
    // counted. Read by the controller (P4Runtime CounterEntry).
    counter(PORT_COUNTER_SIZE, CounterType.packets) ecn_marked;

    // kmin, kmax: queue depths in packets; pmax: marking probability at
    // depth kmax, in 1/65536 (65535: almost always).
    action set_thresholds(bit<19> kmin, bit<19> kmax, bit<16> pmax) {
        meta.ecn.kmin = kmin;
        meta.ecn.kmax = kmax;
        meta.ecn.pmax = pmax;
    }

    // ecn_config: RED thresholds of an egress port.
    //   key:     egress port (exact)
    //   actions: set_thresholds(kmin, kmax, pmax); default nop (never marks)
    //   filled by the controller for the fabric's ports (DCQCN: e.g. Kmin 5,
    //   Kmax 200 packets, Pmax 1%). Only ECN-capable packets (ECT(0), ECT(1))
    //   are marked: never at depth <= kmin, always at depth > kmax, and in
    //   between with probability pmax/65536 * (depth - kmin) / (kmax - kmin).
    table ecn_config {
        key = {
            standard_metadata.egress_port: exact @name("egress_port");
        }
        actions = {
            set_thresholds;
            @defaultonly nop;
        }
        const default_action = nop();
        size = ECN_CONFIG_TABLE_SIZE;
    }

    // ecn_class_config: RED thresholds of one traffic class of an egress port,
    // looked up before the port's own (ecn_config).
    //   key:     egress port, traffic class (standard_metadata.priority; both exact)
    //   actions: set_thresholds(kmin, kmax, pmax); default nop (ecn_config decides)
    //   filled by the controller for the classes it gives thresholds of their own
    //   (controller.lossless: e.g. a lossless class marked below its XOFF).
    table ecn_class_config {
        key = {
            standard_metadata.egress_port: exact @name("egress_port");
            standard_metadata.priority:    exact @name("priority");
        }
        actions = {
            set_thresholds;
            @defaultonly nop;
        }
        const default_action = nop();
        size = ECN_CLASS_CONFIG_TABLE_SIZE;
    }

    apply {
        bit<2> ecn = ECN_NOT_ECT;
        if (hdr.ipv4.isValid()) {
            ecn = hdr.ipv4.ecn;
        } else if (hdr.ipv6.isValid()) {
            ecn = hdr.ipv6.ecn;
        }
        if (ecn == ECN_ECT0 || ecn == ECN_ECT1) {
            bool configured = ecn_class_config.apply().hit;
            if (!configured) {
                configured = ecn_config.apply().hit;
            }
            if (configured) {
                bit<19> depth = standard_metadata.enq_qdepth;
                bool mark = false;
                if (depth > meta.ecn.kmin) {
                    if (depth > meta.ecn.kmax) {
                        mark = true;
                    } else {
                        // P(mark) = pmax/65536 * (depth - kmin) / (kmax - kmin),
                        // without a division: r uniform in [0, 65535] is below
                        // pmax * (depth - kmin) / (kmax - kmin) exactly when
                        // r * (kmax - kmin) < pmax * (depth - kmin).
                        bit<16> r;
                        random(r, 0, 0xFFFF);
                        bit<40> lhs = (bit<40>)r * (bit<40>)(meta.ecn.kmax - meta.ecn.kmin);
                        bit<40> rhs = (bit<40>)meta.ecn.pmax * (bit<40>)(depth - meta.ecn.kmin);
                        mark = lhs < rhs;
                    }
                }
                if (mark) {
                    // IPv4: the header checksum is recomputed on the way out
                    // (FabricComputeChecksum); IPv6 has none; TCP/UDP
                    // checksums do not cover these bits.
                    if (hdr.ipv4.isValid()) {
                        hdr.ipv4.ecn = ECN_CE;
                    } else {
                        hdr.ipv6.ecn = ECN_CE;
                    }
                    ecn_marked.count((bit<32>)standard_metadata.egress_port);
                }
            }
        }
    }
}

#endif  // __ECN__
