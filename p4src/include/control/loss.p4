// Packet loss emulation in egress: a controller-set drop probability per
// egress port, so tests and benchmarks can show recovery (this kernel has no
// netem). Clones are never dropped here.

#ifndef __LOSS__
#define __LOSS__

#include "../header.p4"

control Loss(inout headers_t hdr,
             inout fabric_metadata_t meta,
             inout standard_metadata_t standard_metadata) {

    // loss_dropped: packets dropped here, per egress port. Read by the
    // controller (P4Runtime CounterEntry).
    counter(PORT_COUNTER_SIZE, CounterType.packets) loss_dropped;

    // probability: in 1/65536 (655: about 1%, 3277: about 5%).
    action set_loss(bit<16> probability) {
        meta.loss_probability = probability;
    }

    // loss_config: drop probability of an egress port.
    //   key:     egress port (exact)
    //   actions: set_loss(probability); default nop (nothing dropped)
    //   a packet leaving the port is dropped when a 16-bit random() draw is
    //   below probability.
    table loss_config {
        key = {
            standard_metadata.egress_port: exact @name("egress_port");
        }
        actions = {
            set_loss;
            @defaultonly nop;
        }
        const default_action = nop();
        size = LOSS_CONFIG_TABLE_SIZE;
    }

    apply {
        if (loss_config.apply().hit) {
            bit<16> r;
            random(r, 0, 0xFFFF);
            if (r < meta.loss_probability) {
                mark_to_drop(standard_metadata);
                meta.lost = true;
                loss_dropped.count((bit<32>)standard_metadata.egress_port);
            }
        }
    }
}

#endif  // __LOSS__
