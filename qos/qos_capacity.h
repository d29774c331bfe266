/* SPDX-License-Identifier: Apache-2.0
 * qos_capacity: the daemon measures what it can serve, so QoS minimums work
 * without a hand-set qos_capacity_*.
 *
 * Disk: in the data directory, a scratch file of @c mib MiB is written in
 * 1 MiB blocks and fdatasync'ed (write bytes/s), read back in 1 MiB blocks
 * (read bytes/s), then read at random 4 KiB offsets for 200 ms (operations/s),
 * all with O_DIRECT where the file system allows it (else buffered, with the
 * page cache dropped for the file before each read pass); the file is removed.
 * Network: the fastest "up" interface other than loopback that reports a link
 * speed (/sys/class/net/NAME/speed, Mb/s) bounds both bandwidths; loopback
 * and interfaces without a speed bound nothing.
 * Thread: any; blocks for the measurement (call it before the loops start). */
#ifndef QOS_CAPACITY_H
#define QOS_CAPACITY_H

#include <stdint.h>

struct qos_capacity {
    uint64_t read_bps, write_bps, iops; /* what the daemon will use */
    uint64_t disk_read_bps, disk_write_bps, disk_iops;
    uint64_t net_bps; /* 0: no link speed known */
    uint32_t ms;      /* how long the measurement took */
};

/** Measure the capacity of the store in @p dir with a @p mib MiB scratch file.
 * @return 0, -EINVAL (@p mib 0 or over 1024), -errno of the file system (the
 *         scratch file could not be made, written or read; *out is zeroed). */
int qos_capacity_probe(const char *dir, uint32_t mib, struct qos_capacity *out);

#endif
