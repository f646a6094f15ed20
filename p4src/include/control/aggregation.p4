// In-network aggregation (SwitchML's protocol, ATP's jobs and trees).
//
// Workers send each chunk of their job's frame_values int32 values (1 to AGG_MAX_BLOCKS
// blocks of AGG_BLOCK_VALUES) as one contribution (UDP to AGG_UDP_PORT, addressed to the
// job's fallback aggregator, a host process).
// Every switch of the job's aggregation tree (chosen by the controller: the
// workers' edge switches, then aggregation and core switches up to a root)
// adds its children's contributions in a slot of registers; a complete slot
// goes up to the parent as one partial sum, and the root sends the sums down
// to every worker (multicast at each level). Switches outside the tree route
// the packets as any other, to the fallback aggregator.
//
// Each slot has two sets (SwitchML's shadow copies): chunk c uses set
// (c / slots) % 2, so the result of a set stays readable while the workers
// fill the other one, and a retransmitted contribution is recognised by its
// bit in the set's bitmap: answered from the stored result, never added twice.
// Sums saturate at INT32_MAX / INT32_MIN and flag AGG_FLAG_OVERFLOW. A frame of B blocks
// keeps its set's state at its first pool slot and block b's accumulators at pool slot
// first + b (the job's range is slots x B pool slots); a frame of another size than its job's
// is refused.
// Contract and packet layout: p4src/README.md, "In-network aggregation".

#ifndef __AGGREGATION__
#define __AGGREGATION__

#include "../header.p4"

// One value: the accumulator at value_base + I and the block's field F, combined in place.
// value := F & keep_packet, F := (accumulator & keep_acc) + value: AGG_OP_READ gives the
// accumulator, AGG_OP_WRITE the packet's value, AGG_OP_ADD their sum, saturated where it wrapped
// (both operands of one sign, the sum of the other; never for READ or WRITE, whose sum is one of
// them): INT32_MAX when the wrapped sum is negative, INT32_MIN when not. Packet and accumulator
// end up equal. meta.agg.acc holds the accumulator, then whether the sum wrapped. Written so that
// p4c keeps every statement one small assignment (a field assigned afresh it copies, whole
// expression, into each later use of it, unless what it was made of changed in between): the
// BMv2 JSON holds these 64 values once per block call, five times.
#define COMBINE(F, I) {                                                                        \
    agg_values.read(meta.agg.acc, meta.agg.value_base + I);                                   \
    meta.agg.acc = meta.agg.acc & meta.agg.keep_acc;                                          \
    meta.agg.value = block.F & meta.agg.keep_packet;                                          \
    block.F = meta.agg.value + meta.agg.acc;                                                  \
    meta.agg.acc = ((meta.agg.acc ^ block.F) & (meta.agg.value ^ block.F)) >> 31;            \
    meta.agg.overflow = meta.agg.overflow | (bit<1>)meta.agg.acc;                             \
    block.F = (meta.agg.acc == 1) ? AGG_INT32_MIN - (bit<32>)block.F[31:31] : block.F;        \
    agg_values.write(meta.agg.value_base + I, block.F);                                       \
}

control Aggregation(inout headers_t hdr,
                    inout fabric_metadata_t meta,
                    inout standard_metadata_t standard_metadata) {

    // Per set, indexed by (slot_base + slot) * 2 + set (AGG_SETS entries),
    // written by the data plane only.
    //   agg_bitmap:   bit i set: child i contributed to the set's current round
    //   agg_count:    contributions in the current round (fan_in: complete)
    //   agg_exponent: maximum biased block exponent of the round
    //   agg_flags:    AGG_FLAG_OVERFLOW | AGG_STATE_DONE (the set holds the final sums)
    //   agg_seq:      the round's chunk index (a result for another chunk is stale)
    //   agg_owner:    the epoch of the job that last used the set; a set of
    //                 another epoch counts as empty, so a new job never sees
    //                 the state an earlier job left in its slots
    register<bit<32>>(AGG_SETS) agg_bitmap;
    register<bit<8>>(AGG_SETS)  agg_count;
    register<bit<8>>(AGG_SETS)  agg_exponent;
    register<bit<8>>(AGG_SETS)  agg_flags;
    register<bit<32>>(AGG_SETS) agg_seq;
    register<bit<16>>(AGG_SETS) agg_owner;
    // agg_values: the accumulators, pool slot p's set v at ((p * 2) + v) * AGG_BLOCK_VALUES + i
    // (AGG_CELLS entries); block b of a frame is at pool slot slot_base + slot * blocks + b.
    register<bit<32>>(AGG_CELLS) agg_values;

    // agg_ops: aggregation packets by outcome (AGG_OUTCOME_*). Read by the
    // controller and the benchmarks (P4Runtime CounterEntry).
    counter(AGG_OUTCOMES, CounterType.packets) agg_ops;

    action aggregate_common(bit<16> epoch, bit<32> slot_base, bit<16> slot_count, bit<16> frame_values,
                            bit<8> fan_in, bit<16> group) {
        meta.agg.handled = true;
        meta.agg.epoch = epoch;
        meta.agg.slot_base = slot_base;
        meta.agg.slot_count = slot_count;
        meta.agg.frame_values = frame_values;
        meta.agg.fan_in = fan_in;
        meta.agg.group = group;
    }

    // The root of the job's tree: complete sets become results, multicast to
    // every child through `group`.
    action aggregate_root(bit<16> epoch, bit<32> slot_base, bit<16> slot_count, bit<16> frame_values,
                          bit<8> fan_in, bit<16> group) {
        aggregate_common(epoch, slot_base, slot_count, frame_values, fan_in, group);
        meta.agg.is_root = true;
    }

    // Below the root: complete sets go up through parent_port as one
    // contribution with worker_id = index_at_parent, from own_mac to
    // parent_mac; results from the parent come down through `group`.
    action aggregate_child(bit<16> epoch, bit<32> slot_base, bit<16> slot_count, bit<16> frame_values,
                           bit<8> fan_in, bit<16> group, port_num_t parent_port, bit<8> index_at_parent,
                           mac_addr_t own_mac, mac_addr_t parent_mac) {
        aggregate_common(epoch, slot_base, slot_count, frame_values, fan_in, group);
        meta.agg.is_root = false;
        meta.agg.parent_port = parent_port;
        meta.agg.index_at_parent = index_at_parent;
        meta.agg.own_mac = own_mac;
        meta.agg.parent_mac = parent_mac;
    }

    // agg_jobs: the jobs this switch aggregates, and its place in each tree.
    //   key:     agg.job_id (exact)
    //   actions: aggregate_root(epoch, slot_base, slot_count, frame_values, fan_in, group),
    //            aggregate_child(epoch, slot_base, slot_count, frame_values, fan_in, group,
    //                            parent_port, index_at_parent, own_mac, parent_mac);
    //            default nop (the packet is routed to the job's fallback aggregator)
    //   filled by the job manager (controller/aggregation/). slot_count: the job's window in
    //   frames; frame_values: the values of each of its frames, AGG_BLOCK_VALUES x B with
    //   1 <= B <= AGG_MAX_BLOCKS (a packet of another size is refused); the job owns pool slots
    //   [slot_base, slot_base + slot_count * B), and ranges of jobs never overlap; epoch is new
    //   for every job the manager starts (never 0); fan_in <= AGG_MAX_CHILDREN; group is a
    //   multicast group with one replica per child port.
    table agg_jobs {
        key = {
            hdr.agg.job_id: exact @name("job_id");
        }
        actions = {
            aggregate_root;
            aggregate_child;
            @defaultonly nop;
        }
        const default_action = nop();
        size = AGG_JOBS_TABLE_SIZE;
    }

    // One block's values with its AGG_BLOCK_VALUES accumulators from value_base on (meta.agg.op
    // as keep_acc and keep_packet say); value_base then moves to the next block's. Called once
    // per block of the frame.
    action combine_block(inout agg_block_h block) {
        COMBINE(v00, 0);
        COMBINE(v01, 1);
        COMBINE(v02, 2);
        COMBINE(v03, 3);
        COMBINE(v04, 4);
        COMBINE(v05, 5);
        COMBINE(v06, 6);
        COMBINE(v07, 7);
        COMBINE(v08, 8);
        COMBINE(v09, 9);
        COMBINE(v10, 10);
        COMBINE(v11, 11);
        COMBINE(v12, 12);
        COMBINE(v13, 13);
        COMBINE(v14, 14);
        COMBINE(v15, 15);
        COMBINE(v16, 16);
        COMBINE(v17, 17);
        COMBINE(v18, 18);
        COMBINE(v19, 19);
        COMBINE(v20, 20);
        COMBINE(v21, 21);
        COMBINE(v22, 22);
        COMBINE(v23, 23);
        COMBINE(v24, 24);
        COMBINE(v25, 25);
        COMBINE(v26, 26);
        COMBINE(v27, 27);
        COMBINE(v28, 28);
        COMBINE(v29, 29);
        COMBINE(v30, 30);
        COMBINE(v31, 31);
        COMBINE(v32, 32);
        COMBINE(v33, 33);
        COMBINE(v34, 34);
        COMBINE(v35, 35);
        COMBINE(v36, 36);
        COMBINE(v37, 37);
        COMBINE(v38, 38);
        COMBINE(v39, 39);
        COMBINE(v40, 40);
        COMBINE(v41, 41);
        COMBINE(v42, 42);
        COMBINE(v43, 43);
        COMBINE(v44, 44);
        COMBINE(v45, 45);
        COMBINE(v46, 46);
        COMBINE(v47, 47);
        COMBINE(v48, 48);
        COMBINE(v49, 49);
        COMBINE(v50, 50);
        COMBINE(v51, 51);
        COMBINE(v52, 52);
        COMBINE(v53, 53);
        COMBINE(v54, 54);
        COMBINE(v55, 55);
        COMBINE(v56, 56);
        COMBINE(v57, 57);
        COMBINE(v58, 58);
        COMBINE(v59, 59);
        COMBINE(v60, 60);
        COMBINE(v61, 61);
        COMBINE(v62, 62);
        COMBINE(v63, 63);
        meta.agg.value_base = meta.agg.value_base + AGG_NEXT_BLOCK_CELLS;
    }

    action refuse() {
        agg_ops.count(AGG_OUTCOME_REFUSED);
        mark_to_drop(standard_metadata);
    }

    action send_up() {
        hdr.agg.pkt_type = AGG_TYPE_CONTRIB;
        hdr.agg.worker_id = meta.agg.index_at_parent;
        hdr.ethernet.src_addr = meta.agg.own_mac;
        hdr.ethernet.dst_addr = meta.agg.parent_mac;
        standard_metadata.egress_spec = meta.agg.parent_port;
    }

    apply {
        if (hdr.agg.isValid() && agg_jobs.apply().hit) {
            meta.skip_routing = true;           // aggregation decides where the packet goes
            hdr.udp.checksum = 0;               // the values change; IPv4 allows no checksum
            if (meta.agg.parsed_values != meta.agg.frame_values
                    || hdr.agg.slot >= meta.agg.slot_count || hdr.agg.set > 1) {
                // Not a whole frame of the job's size (another size, a count that is no whole
                // number of blocks, a UDP length that disagrees, a truncated frame), or outside
                // the job's slots: no register is touched.
                refuse();
                return;
            }
            bit<32> blocks = (bit<32>)(meta.agg.frame_values >> AGG_BLOCK_SHIFT);
            bit<32> slot_index = meta.agg.slot_base + (bit<32>)hdr.agg.slot * blocks;   // the frame's first pool slot
            bit<32> set_bit = (bit<32>)hdr.agg.set[0:0];
            meta.agg.set_index = (slot_index << 1) | set_bit;
            meta.agg.value_base = meta.agg.set_index << AGG_BLOCK_SHIFT;
            bit<32> other_index = (slot_index << 1) | (set_bit ^ 1);
            bit<16> owner;
            bit<8> flags;
            bit<32> seq;
            agg_owner.read(owner, meta.agg.set_index);
            agg_flags.read(flags, meta.agg.set_index);
            agg_seq.read(seq, meta.agg.set_index);
            bool mine = owner == meta.agg.epoch;
            bit<32> bitmap = 0;
            bit<8> count = 0;
            bit<8> exponent = 0;
            bool contribution = false;          // a new contribution: the set's state is written at the end
            meta.agg.op = AGG_OP_NONE;

            // 1. Decide what the packet is and what happens to the values.
            if (hdr.agg.pkt_type == AGG_TYPE_RESULT) {
                if (meta.agg.is_root || !mine || hdr.agg.seq != seq) {
                    refuse();                    // a root makes results; a stale one is dropped
                } else {
                    meta.agg.op = AGG_OP_WRITE;  // keep the sums: retransmissions are answered here
                    agg_flags.write(meta.agg.set_index, AGG_STATE_DONE | (hdr.agg.flags & AGG_FLAG_OVERFLOW));
                    agg_exponent.write(meta.agg.set_index, hdr.agg.exponent);
                    standard_metadata.mcast_grp = meta.agg.group;
                    agg_ops.count(AGG_OUTCOME_RESULT_DOWN);
                }
            } else if (hdr.agg.pkt_type != AGG_TYPE_CONTRIB || hdr.agg.worker_id >= meta.agg.fan_in
                       || hdr.agg.worker_id >= AGG_MAX_CHILDREN) {
                refuse();
            } else {
                bit<32> child = 32w1 << (bit<8>)hdr.agg.worker_id;
                bit<32> other_bitmap;
                agg_bitmap.read(other_bitmap, other_index);
                agg_bitmap.write(other_index, other_bitmap & ~child);   // SwitchML: the child moved on
                if (mine) {
                    agg_bitmap.read(bitmap, meta.agg.set_index);
                    agg_count.read(count, meta.agg.set_index);
                    agg_exponent.read(exponent, meta.agg.set_index);
                } else {
                    flags = 0;
                }
                bool complete = count == meta.agg.fan_in;

                if (bitmap & child != 0) {
                    // A retransmission: its values are in the set already.
                    hdr.agg.flags = flags & AGG_FLAG_OVERFLOW;
                    hdr.agg.exponent = exponent;
                    hdr.agg.seq = seq;
                    if (flags & AGG_STATE_DONE != 0) {
                        meta.agg.op = AGG_OP_READ;
                        hdr.agg.pkt_type = AGG_TYPE_RESULT;
                        standard_metadata.egress_spec = standard_metadata.ingress_port;
                        agg_ops.count(AGG_OUTCOME_DUP_ANSWERED);
                    } else if (complete && !meta.agg.is_root) {
                        meta.agg.op = AGG_OP_READ;    // our partial or the parent's result was lost
                        send_up();
                        agg_ops.count(AGG_OUTCOME_DUP_RESENT_UP);
                    } else {
                        agg_ops.count(AGG_OUTCOME_DUP_DROPPED);
                        mark_to_drop(standard_metadata);
                    }
                } else {
                    contribution = true;
                    if (complete || count == 0) {     // the first contribution of a new round
                        count = 1;
                        bitmap = child;
                        exponent = hdr.agg.exponent;
                        flags = hdr.agg.flags & AGG_FLAG_OVERFLOW;   // a child's partial may have saturated
                        seq = hdr.agg.seq;
                        meta.agg.op = AGG_OP_WRITE;
                    } else {
                        count = count + 1;
                        bitmap = bitmap | child;
                        flags = flags | (hdr.agg.flags & AGG_FLAG_OVERFLOW);
                        if (hdr.agg.exponent > exponent) {
                            exponent = hdr.agg.exponent;
                        }
                        meta.agg.op = AGG_OP_ADD;
                    }
                }
            }

            // 2. The values, block by block: one combine_block in the source (p4c makes a copy
            //    of it per call), the frame's blocks in turn (a whole frame: blocks 0 .. B-1 valid).
            if (meta.agg.op != AGG_OP_NONE) {
                meta.agg.overflow = 0;
                meta.agg.keep_acc = (meta.agg.op == AGG_OP_WRITE) ? 32w0 : ~32w0;
                meta.agg.keep_packet = (meta.agg.op == AGG_OP_READ) ? 32w0 : ~32w0;
                combine_block(hdr.agg_blocks[0]);
                if (hdr.agg_blocks[1].isValid()) {
                    combine_block(hdr.agg_blocks[1]);
                }
                if (hdr.agg_blocks[2].isValid()) {
                    combine_block(hdr.agg_blocks[2]);
                }
                if (hdr.agg_blocks[3].isValid()) {
                    combine_block(hdr.agg_blocks[3]);
                }
                if (hdr.agg_blocks[4].isValid()) {      // AGG_MAX_BLOCKS
                    combine_block(hdr.agg_blocks[4]);
                }
            }

            // 3. A new contribution: complete the set or keep it, and store its state.
            if (contribution) {
                if (meta.agg.overflow == 1) {
                    flags = flags | AGG_FLAG_OVERFLOW;
                }
                if (count == meta.agg.fan_in) {
                    hdr.agg.flags = flags & AGG_FLAG_OVERFLOW;
                    hdr.agg.exponent = exponent;
                    hdr.agg.seq = seq;
                    if (meta.agg.is_root) {
                        flags = flags | AGG_STATE_DONE;
                        hdr.agg.pkt_type = AGG_TYPE_RESULT;
                        standard_metadata.mcast_grp = meta.agg.group;
                        agg_ops.count(AGG_OUTCOME_COMPLETED);
                    } else {
                        send_up();
                        agg_ops.count(AGG_OUTCOME_PARTIAL_UP);
                    }
                } else {
                    agg_ops.count(AGG_OUTCOME_CONSUMED);
                    mark_to_drop(standard_metadata);
                }
                agg_bitmap.write(meta.agg.set_index, bitmap);
                agg_count.write(meta.agg.set_index, count);
                agg_exponent.write(meta.agg.set_index, exponent);
                agg_flags.write(meta.agg.set_index, flags);
                agg_seq.write(meta.agg.set_index, seq);
                agg_owner.write(meta.agg.set_index, meta.agg.epoch);
            }
        }
    }
}

// Results leaving through a worker's port are addressed to that worker, from
// the job's fallback aggregator (the address the worker sent to), so a worker
// sees the same replies with and without in-network aggregation.
control AggregationEgress(inout headers_t hdr,
                          inout fabric_metadata_t meta,
                          inout standard_metadata_t standard_metadata) {

    action to_worker(mac_addr_t smac, mac_addr_t dmac, ipv4_addr_t ipv4) {
        hdr.ethernet.src_addr = smac;
        hdr.ethernet.dst_addr = dmac;
        hdr.ipv4.src_addr = hdr.ipv4.dst_addr;
        hdr.ipv4.dst_addr = ipv4;
    }

    // agg_result_dst: the worker behind a host-facing port.
    //   key:     egress port (exact)
    //   actions: to_worker(smac: this switch, dmac and ipv4: the host's); default nop
    //            (a port towards a switch: the next switch of the tree takes the packet as it is)
    //   filled by the job manager for every host port of a switch in a job's tree.
    table agg_result_dst {
        key = {
            standard_metadata.egress_port: exact @name("egress_port");
        }
        actions = {
            to_worker;
            @defaultonly nop;
        }
        const default_action = nop();
        size = AGG_RESULT_DST_TABLE_SIZE;
    }

    apply {
        if (meta.agg.handled && hdr.agg.isValid() && hdr.agg.pkt_type == AGG_TYPE_RESULT) {
            agg_result_dst.apply();
        }
    }
}

#endif  // __AGGREGATION__
