// INT-MD in egress: source (add the INT headers), every INT hop (push one
// hop of metadata), sink (remove INT, clone the packet into a telemetry
// report) and the report itself. Header formats: header.p4; constants:
// define.p4; the contract: p4src/README.md.
//
// One pass of a normal packet through IntEgress:
//   1. source (ingress watchlist hit, int_meta.source): add shim + INT-MD
//      header (16 bytes), Remaining Hop Count = max_hop, DSCP |= INT_DSCP_BIT
//      (the original DSCP goes into the shim);
//   2. every INT packet, source included: push this switch's hop (32 bytes)
//      and decrement Remaining Hop Count, or set E (Remaining Hop Count 0,
//      or the stack already holds MAX_INT_HOPS hops) or M (the IP packet
//      would exceed int_config's mtu; not checked on sink ports, where the
//      INT packet does not leave) and push nothing;
//   3. sink (egress port in sink_ports): save the INT view in
//      int_report_metadata_t, remove every INT header, restore DSCP and
//      lengths, and clone (E2E, INT_REPORT_SESSION) preserving the saved
//      view; with D set the packet itself is dropped.
// Lengths (shim length, IPv4 total length / IPv6 payload length, UDP length)
// follow every change, and so does the TCP/UDP checksum (incrementally; a
// UDP checksum of 0 stays 0), so the host behind the sink receives the
// original bytes.
//
// The report clone's pass (instance type E2E clone, int_report.valid) puts
// the INT headers back from metadata in front of the payload and the
// report headers in front of the inner IP header, and truncates.

#ifndef __INT_EGRESS__
#define __INT_EGRESS__

#include "../header.p4"
#include "int_common.p4"

control IntEgress(inout headers_t hdr,
                  inout fabric_metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

    IntL4Words() l4_words_in;
    Csum32() csum_words_in;
    Csum32() csum_base;
    Csum32() csum_received;
    IntL4Checksum() l4_csum_view;
    IntL4Checksum() l4_csum_out;
    IntLengths() lengths_source;
    IntLengths() lengths_hop;
    IntLengths() lengths_strip;
    IntLengths() lengths_report;

    // report_seq: the sequence number of the next telemetry report of this
    // switch (index 0; the group header carries its low 22 bits). Read or
    // reset by the controller (P4Runtime RegisterEntry; BMv2: Thrift).
    register<bit<32>>(1) report_seq;

    // switch_id: node id in every hop and report; mtu: the largest IP
    // packet (IPv4 total length, IPv6 40 + payload length) the switch's
    // links carry: no hop is pushed that would make an INT packet larger.
    action configure(bit<32> switch_id, bit<16> mtu) {
        meta.int_meta.switch_id = switch_id;
        meta.int_meta.mtu = mtu;
    }

    // int_config: this switch's INT identity.
    //   key:     none
    //   actions: configure(switch_id, mtu); default configure(0, INT_DEFAULT_MTU)
    //   set by the controller (P4Runtime: modify the default entry).
    table int_config {
        actions = {
            configure;
        }
        default_action = configure(0, INT_DEFAULT_MTU);
        size = 1;
    }

    action mark_sink() {
        meta.int_meta.sink = true;
    }

    // sink_ports: egress ports where INT ends (host-facing ports of edge
    // switches); INT packets leaving here are stripped and reported.
    //   key:     egress port (exact)
    //   actions: mark_sink; default nop
    //   filled by the controller.
    table sink_ports {
        key = {
            standard_metadata.egress_port: exact @name("egress_port");
        }
        actions = {
            mark_sink;
            @defaultonly nop;
        }
        const default_action = nop();
        size = INT_SINK_PORTS_TABLE_SIZE;
    }

    // The report's outer headers: Ethernet / IPv4 (DF, id 0, TTL REPORT_TTL;
    // checksum by FabricComputeChecksum) / UDP (source port
    // REPORT_UDP_SPORT, checksum 0). Lengths are filled in apply.
    action configure_report(mac_addr_t src_mac, mac_addr_t dst_mac,
                            ipv4_addr_t src_ip, ipv4_addr_t dst_ip, bit<16> dst_port) {
        hdr.report_ethernet.setValid();
        hdr.report_ethernet.dst_addr = dst_mac;
        hdr.report_ethernet.src_addr = src_mac;
        hdr.report_ethernet.ether_type = ETHERTYPE_IPV4;
        hdr.report_ipv4.setValid();
        hdr.report_ipv4.version = 4;
        hdr.report_ipv4.ihl = IPV4_MIN_IHL;
        hdr.report_ipv4.dscp = 0;
        hdr.report_ipv4.ecn = ECN_NOT_ECT;
        hdr.report_ipv4.identification = 0;
        hdr.report_ipv4.flags = IPV4_FLAGS_DF;
        hdr.report_ipv4.frag_offset = 0;
        hdr.report_ipv4.ttl = REPORT_TTL;
        hdr.report_ipv4.protocol = PROTO_UDP;
        hdr.report_ipv4.hdr_checksum = 0;
        hdr.report_ipv4.src_addr = src_ip;
        hdr.report_ipv4.dst_addr = dst_ip;
        hdr.report_udp.setValid();
        hdr.report_udp.sport = REPORT_UDP_SPORT;
        hdr.report_udp.dport = dst_port;
        hdr.report_udp.checksum = 0;
    }

    // report_config: where telemetry reports go (the collector).
    //   key:     none
    //   actions: configure_report(src_mac, dst_mac, src_ip, dst_ip, dst_port);
    //            default nop: report clones are dropped
    //   set by the controller (P4Runtime: modify the default entry), with
    //   clone session INT_REPORT_SESSION -> the telemetry port.
    table report_config {
        actions = {
            configure_report;
            @defaultonly nop;
        }
        default_action = nop();
        size = 1;
    }

    bit<16> int_bytes;          // shim + INT-MD header + hops: (shim length + 1) words

    apply {
        int_config.apply();

        if (standard_metadata.instance_type == PKT_INSTANCE_TYPE_EGRESS_CLONE) {
            if (meta.int_report.valid) {
                report_config.apply();     // keyless: a miss runs the default action
                if (hdr.report_ethernet.isValid()) {
                    // The inner packet: the INT view the sink saved.
                    hdr.ethernet.setInvalid();
                    hdr.int_shim = int_shim_restore(meta.int_report.shim);
                    hdr.int_md = int_md_restore(meta.int_report.md);
                    bit<8> hops = (hdr.int_shim.len - INT_MD_WORDS) >> 3;    // / INT_HOP_WORDS
                    if (hops > 0) { hdr.int_hops[0] = int_hop_restore(meta.int_report.hop0); }
                    if (hops > 1) { hdr.int_hops[1] = int_hop_restore(meta.int_report.hop1); }
                    if (hops > 2) { hdr.int_hops[2] = int_hop_restore(meta.int_report.hop2); }
                    if (hops > 3) { hdr.int_hops[3] = int_hop_restore(meta.int_report.hop3); }
                    if (hops > 4) { hdr.int_hops[4] = int_hop_restore(meta.int_report.hop4); }
                    if (hops > 5) { hdr.int_hops[5] = int_hop_restore(meta.int_report.hop5); }
                    int_bytes = ((bit<16>)hdr.int_shim.len + 1) << 2;
                    lengths_report.apply(hdr, meta, int_bytes);
                    bit<32> ip_hdr_bytes = IPV6_HEADER_BYTES;
                    if (hdr.ipv4.isValid()) {
                        hdr.ipv4.dscp = meta.int_report.dscp;
                        ip_hdr_bytes = IPV4_HEADER_BYTES;
                    } else {
                        hdr.ipv6.dscp = meta.int_report.dscp;
                    }
                    bit<32> l4_hdr_bytes = UDP_HEADER_BYTES;
                    if (hdr.tcp.isValid()) {
                        hdr.tcp.checksum = meta.int_report.l4_csum;
                        l4_hdr_bytes = TCP_HEADER_BYTES;
                    } else {
                        hdr.udp.checksum = meta.int_report.l4_csum;
                    }

                    // Inner contents: IP, L4 and INT headers, then at most
                    // REPORT_PAYLOAD_WORDS whole words of the payload.
                    bit<32> headers_bytes = ip_hdr_bytes + l4_hdr_bytes + (bit<32>)int_bytes;
                    bit<32> payload_words = 0;
                    if (meta.int_meta.ip_len > headers_bytes) {
                        payload_words = (meta.int_meta.ip_len - headers_bytes) >> 2;
                    }
                    if (payload_words > REPORT_PAYLOAD_WORDS) {
                        payload_words = REPORT_PAYLOAD_WORDS;
                    }
                    bit<32> inner_words = (headers_bytes >> 2) + payload_words;

                    bit<32> seq;
                    report_seq.read(seq, 0);
                    report_seq.write(0, seq + 1);
                    hdr.report_group.setValid();
                    hdr.report_group.ver = REPORT_VERSION;
                    hdr.report_group.hw_id = REPORT_HW_ID;
                    hdr.report_group.seq_no = seq[21:0];
                    hdr.report_group.node_id = meta.int_meta.switch_id;
                    hdr.report_individual.setValid();
                    hdr.report_individual.rep_type = REPORT_TYPE_INT;
                    hdr.report_individual.in_type =
                        hdr.ipv4.isValid() ? REPORT_IN_TYPE_IPV4 : REPORT_IN_TYPE_IPV6;
                    hdr.report_individual.rep_len = REPORT_MAIN_WORDS + (bit<8>)inner_words;
                    hdr.report_individual.md_len = 0;
                    hdr.report_individual.d = 0;
                    hdr.report_individual.q = 0;
                    hdr.report_individual.f = 1;
                    hdr.report_individual.i = 0;
                    hdr.report_individual.rsvd = 0;
                    hdr.report_int.setValid();
                    hdr.report_int.rep_md_bits = 0;
                    hdr.report_int.domain_id = INT_DOMAIN_ID;
                    hdr.report_int.ds_md_bits = 0;
                    hdr.report_int.ds_md_status = 0;

                    bit<32> report_bytes = REPORT_OUTER_BYTES + (inner_words << 2);
                    hdr.report_ipv4.total_len = (bit<16>)(report_bytes - ETH_HEADER_BYTES);
                    hdr.report_udp.len = (bit<16>)(report_bytes - ETH_HEADER_BYTES - IPV4_HEADER_BYTES);
                    truncate(report_bytes);
                } else {
                    mark_to_drop(standard_metadata);
                }
            }
        } else if (standard_metadata.instance_type == PKT_INSTANCE_TYPE_NORMAL
                   && standard_metadata.egress_port != CPU_PORT
                   && standard_metadata.parser_error == error.NoError
                   && (hdr.int_md.isValid() || meta.int_meta.source)) {
            // Only TCP/UDP packets get here: the parser extracts INT after
            // TCP/UDP only and the watchlist looks only at TCP/UDP. A packet
            // shorter than its INT headers claim (parser error) is left as it
            // is: the headers extracted are emitted again unchanged.
            if (hdr.ipv4.isValid()) {
                meta.int_meta.ip_len = (bit<32>)hdr.ipv4.total_len;
            } else {
                meta.int_meta.ip_len = IPV6_HEADER_BYTES + (bit<32>)hdr.ipv6.payload_len;
            }
            sink_ports.apply();

            // TCP/UDP checksum: base = sum of its coverage - what INT and the
            // L4 length contribute (RFC 1624: subtracting is adding the
            // complement). A UDP checksum of 0 means none: left as it is.
            bit<16> l4_csum;
            if (hdr.tcp.isValid()) {
                l4_csum = hdr.tcp.checksum;
                meta.int_meta.l4_csum_update = true;
            } else {
                l4_csum = hdr.udp.checksum;
                meta.int_meta.l4_csum_update = l4_csum != 0;
            }
            bit<16> c;
            l4_words_in.apply(hdr, meta);
            csum_words_in.apply(meta.int_meta.l4_words, c);                 // ~fold(words)
            csum_base.apply((bit<32>)(~l4_csum) + (bit<32>)c, c);          // ~fold(sum - words)
            meta.int_meta.l4_csum_base = ~c;
            meta.int_meta.l4_extra = 0;
            // Sink: the hops as received, summed (~fold of each hop's words).
            bit<32> received_hops = 0;
            if (meta.int_meta.sink && hdr.int_shim.isValid()) {
                if (hdr.int_hops[0].isValid()) {
                    hash(c, HashAlgorithm.csum16, 16w0, { hdr.int_hops[0] }, 32w65536);
                    received_hops = received_hops + (bit<32>)(~c);
                }
                if (hdr.int_hops[1].isValid()) {
                    hash(c, HashAlgorithm.csum16, 16w0, { hdr.int_hops[1] }, 32w65536);
                    received_hops = received_hops + (bit<32>)(~c);
                }
                if (hdr.int_hops[2].isValid()) {
                    hash(c, HashAlgorithm.csum16, 16w0, { hdr.int_hops[2] }, 32w65536);
                    received_hops = received_hops + (bit<32>)(~c);
                }
                if (hdr.int_hops[3].isValid()) {
                    hash(c, HashAlgorithm.csum16, 16w0, { hdr.int_hops[3] }, 32w65536);
                    received_hops = received_hops + (bit<32>)(~c);
                }
                if (hdr.int_hops[4].isValid()) {
                    hash(c, HashAlgorithm.csum16, 16w0, { hdr.int_hops[4] }, 32w65536);
                    received_hops = received_hops + (bit<32>)(~c);
                }
                if (hdr.int_hops[5].isValid()) {
                    hash(c, HashAlgorithm.csum16, 16w0, { hdr.int_hops[5] }, 32w65536);
                    received_hops = received_hops + (bit<32>)(~c);
                }
            }

            // 1. source
            if (meta.int_meta.source) {
                // The fixed headers must fit the MTU, or INT is not started
                // (INT spec 4.3); on a sink port the INT packet never leaves.
                if (meta.int_meta.sink
                        || meta.int_meta.ip_len + (bit<32>)INT_HEADERS_BYTES <= (bit<32>)meta.int_meta.mtu) {
                    hdr.int_shim.setValid();
                    hdr.int_shim.int_type = INT_TYPE_MD;
                    hdr.int_shim.npt = INT_NPT_DSCP;
                    hdr.int_shim.rsvd1 = 0;
                    hdr.int_shim.len = INT_MD_WORDS;
                    hdr.int_shim.rsvd2 = 0;
                    hdr.int_shim.rsvd3 = 0;
                    hdr.int_md.setValid();
                    hdr.int_md.ver = INT_VERSION;
                    hdr.int_md.d = 0;
                    hdr.int_md.e = 0;
                    hdr.int_md.m = 0;
                    hdr.int_md.rsvd = 0;
                    hdr.int_md.hop_ml = INT_HOP_ML;
                    hdr.int_md.remaining_hop_cnt = meta.int_meta.max_hop;
                    hdr.int_md.instruction_bitmap = INT_INSTRUCTIONS;
                    hdr.int_md.domain_id = INT_DOMAIN_ID;
                    hdr.int_md.ds_instruction = 0;
                    hdr.int_md.ds_flags = 0;
                    if (hdr.ipv4.isValid()) {
                        hdr.int_shim.dscp = hdr.ipv4.dscp;
                        hdr.ipv4.dscp = hdr.ipv4.dscp | INT_DSCP_BIT;
                    } else {
                        hdr.int_shim.dscp = hdr.ipv6.dscp;
                        hdr.ipv6.dscp = hdr.ipv6.dscp | INT_DSCP_BIT;
                    }
                    lengths_source.apply(hdr, meta, INT_HEADERS_BYTES);
                }
            }

            if (hdr.int_md.isValid()) {
                // 2. this switch's hop
                if (hdr.int_md.remaining_hop_cnt == 0
                        || hdr.int_hops[MAX_INT_HOPS - 1].isValid()) {
                    hdr.int_md.e = 1;
                } else if (!meta.int_meta.sink
                        && meta.int_meta.ip_len + (bit<32>)INT_HOP_BYTES > (bit<32>)meta.int_meta.mtu) {
                    hdr.int_md.m = 1;
                } else {
                    hdr.int_hops.push_front(1);
                    hdr.int_hops[0].setValid();
                    hdr.int_hops[0].switch_id = meta.int_meta.switch_id;
                    hdr.int_hops[0].ingress_port_id = (bit<16>)standard_metadata.ingress_port;
                    hdr.int_hops[0].egress_port_id = (bit<16>)standard_metadata.egress_port;
                    hdr.int_hops[0].hop_latency = (bit<32>)(standard_metadata.egress_global_timestamp
                                                           - standard_metadata.ingress_global_timestamp);
                    hdr.int_hops[0].queue_id = (bit<8>)standard_metadata.priority;   // the traffic class's queue
                    hdr.int_hops[0].queue_occupancy = (bit<24>)standard_metadata.enq_qdepth;
                    hdr.int_hops[0].ingress_tstamp = (bit<64>)standard_metadata.ingress_global_timestamp;
                    hdr.int_hops[0].egress_tstamp = (bit<64>)standard_metadata.egress_global_timestamp;
                    hdr.int_md.remaining_hop_cnt = hdr.int_md.remaining_hop_cnt - 1;
                    hdr.int_shim.len = hdr.int_shim.len + INT_HOP_WORDS;
                    lengths_hop.apply(hdr, meta, INT_HOP_BYTES);
                    hash(c, HashAlgorithm.csum16, 16w0, { hdr.int_hops[0] }, 32w65536);
                    meta.int_meta.l4_extra = ~c;
                }

                // 3. sink
                if (meta.int_meta.sink) {
                    meta.int_report.l4_csum = l4_csum;
                    if (meta.int_meta.l4_csum_update) {
                        l4_csum_view.apply(hdr, meta);
                        meta.int_report.l4_csum = meta.int_meta.l4_csum;
                    }
                    meta.int_report.valid = true;
                    meta.int_report.shim = int_shim_save(hdr.int_shim);
                    meta.int_report.md = int_md_save(hdr.int_md);
                    meta.int_report.hop0 = int_hop_save(hdr.int_hops[0]);
                    meta.int_report.hop1 = int_hop_save(hdr.int_hops[1]);
                    meta.int_report.hop2 = int_hop_save(hdr.int_hops[2]);
                    meta.int_report.hop3 = int_hop_save(hdr.int_hops[3]);
                    meta.int_report.hop4 = int_hop_save(hdr.int_hops[4]);
                    meta.int_report.hop5 = int_hop_save(hdr.int_hops[5]);
                    if (hdr.ipv4.isValid()) {
                        meta.int_report.dscp = hdr.ipv4.dscp;
                        hdr.ipv4.dscp = hdr.int_shim.dscp;
                    } else {
                        meta.int_report.dscp = hdr.ipv6.dscp;
                        hdr.ipv6.dscp = hdr.int_shim.dscp;
                    }
                    int_bytes = ((bit<16>)hdr.int_shim.len + 1) << 2;
                    lengths_strip.apply(hdr, meta, 0 - int_bytes);
                    bit<1> discard = hdr.int_md.d;
                    hdr.int_shim.setInvalid();
                    hdr.int_md.setInvalid();
                    hdr.int_hops[0].setInvalid();
                    hdr.int_hops[1].setInvalid();
                    hdr.int_hops[2].setInvalid();
                    hdr.int_hops[3].setInvalid();
                    hdr.int_hops[4].setInvalid();
                    hdr.int_hops[5].setInvalid();
                    csum_received.apply(received_hops, c);
                    meta.int_meta.l4_extra = c;     // = ~fold(received hops): subtracts them
                    // The copy is made when egress ends: it has the headers
                    // as this pass leaves them (no INT) and, of the metadata,
                    // int_report only.
                    clone_preserving_field_list(CloneType.E2E, INT_REPORT_SESSION, INT_REPORT_FIELD_LIST);
                    if (discard == 1) {
                        mark_to_drop(standard_metadata);
                    }
                }
            }

            if (meta.int_meta.l4_csum_update) {
                l4_csum_out.apply(hdr, meta);
                if (hdr.tcp.isValid()) {
                    hdr.tcp.checksum = meta.int_meta.l4_csum;
                } else {
                    hdr.udp.checksum = meta.int_meta.l4_csum;
                }
            }
        }
    }
}

#endif  // __INT_EGRESS__
