// Packet-in/out through CPU_PORT (P4Runtime PacketIn/PacketOut).

#ifndef __PACKETIO__
#define __PACKETIO__

#include "../header.p4"

control PacketIoIngress(inout headers_t hdr,
                        inout fabric_metadata_t meta,
                        inout standard_metadata_t standard_metadata) {
    apply {
        // A packet-out leaves through packet_out.egress_port as it is, ahead
        // of data queued there: the controller header is removed and nothing
        // else in ingress runs.
        if (hdr.packet_out.isValid()) {
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            standard_metadata.priority = PRIORITY_CONTROL;
            hdr.packet_out.setInvalid();
            exit;
        }
        // A neighbour's heartbeat (controller/failover/) goes to the
        // controller as it is, tagged with the port it came in on.
        if (hdr.ethernet.isValid() && hdr.ethernet.ether_type == ETHERTYPE_HEARTBEAT) {
            standard_metadata.egress_spec = CPU_PORT;
            exit;
        }
    }
}

control PacketIoEgress(inout headers_t hdr,
                       inout fabric_metadata_t meta,
                       inout standard_metadata_t standard_metadata) {
    apply {
        // Punted packets and copy_to_cpu clones carry their ingress port to
        // the controller (meta.cpu_ig_port survives cloning; see header.p4).
        if (standard_metadata.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = meta.cpu_ig_port;
            hdr.packet_in._pad = 0;
        }
    }
}

#endif  // __PACKETIO__
