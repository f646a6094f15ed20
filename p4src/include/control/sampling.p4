// Flow sampling for traffic engineering (sFlow-style): each IPv4/IPv6 packet
// a host sends into its edge switch goes to the controller as a packet-in
// with a probability the controller sets, so the controller sees every large
// flow without per-flow state in the switch. The draw is random, not every
// N-th packet: a counter in step with interleaved flows (A B A B ...) would
// sample only one of them.

#ifndef __SAMPLING__
#define __SAMPLING__

#include "../header.p4"

control FlowSampling(inout headers_t hdr,
                     inout fabric_metadata_t meta,
                     inout standard_metadata_t standard_metadata) {

    // flow_samples: packets sampled per ingress port. Read by the controller
    // (P4Runtime CounterEntry) to count packet-ins it never received.
    counter(PORT_COUNTER_SIZE, CounterType.packets) flow_samples;

    // probability: in 1/65536 (8192: one packet in 8).
    action sample(bit<16> probability) {
        meta.sample_probability = probability;
    }

    // flow_sampling: the ports whose incoming packets are sampled.
    //   key:     ingress port (exact)
    //   actions: sample(probability): an IP packet of the port is copied to
    //            the controller (I2E clone to CPU_CLONE_SESSION_ID, the packet
    //            as received) when a 16-bit random() draw is below probability;
    //            default nop (not sampled)
    //   filled by the controller's TE on edge switches' host ports. A packet
    //   the ACL also copies to the CPU is copied once (the ACL's copy).
    table flow_sampling {
        key = {
            standard_metadata.ingress_port: exact @name("ig_port");
        }
        actions = {
            sample;
            @defaultonly nop;
        }
        const default_action = nop();
        size = FLOW_SAMPLING_TABLE_SIZE;
    }

    apply {
        if ((hdr.ipv4.isValid() || hdr.ipv6.isValid()) && flow_sampling.apply().hit) {
            bit<16> r;
            random(r, 0, 0xFFFF);
            if (r < meta.sample_probability) {
                clone_preserving_field_list(CloneType.I2E, CPU_CLONE_SESSION_ID, CPU_CLONE_FIELD_LIST);
                flow_samples.count((bit<32>)standard_metadata.ingress_port);
            }
        }
    }
}

#endif  // __SAMPLING__
