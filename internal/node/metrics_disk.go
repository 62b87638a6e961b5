package node

import (
	"github.com/prometheus/client_golang/prometheus"
)

// raftDisk is what the disk series read from the raft store.
type raftDisk interface {
	DataDirFreeBytes() (uint64, error)
	WriteFailures() uint64
}

// diskCollector exports the raft data directory's free space and raft's
// failed writes, read at scrape time: a full disk is what makes raft fail
// to append, and a leader step down, so both must be visible before then.
type diskCollector struct {
	disk     raftDisk
	free     *prometheus.Desc
	failures *prometheus.Desc
}

func newDiskCollector(disk raftDisk) *diskCollector {
	return &diskCollector{
		disk: disk,
		free: prometheus.NewDesc("reconciler_data_dir_free_bytes",
			"Free bytes of the file system holding raft's data directory.", nil, nil),
		failures: prometheus.NewDesc("reconciler_raft_write_failures_total",
			"Writes of raft's log or stable store (term, vote, applied index) that failed since start.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *diskCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.free
	ch <- c.failures
}

// Collect implements prometheus.Collector. Without statfs (another OS)
// the free-space series is absent rather than a made-up number.
func (c *diskCollector) Collect(ch chan<- prometheus.Metric) {
	if free, err := c.disk.DataDirFreeBytes(); err == nil {
		ch <- prometheus.MustNewConstMetric(c.free, prometheus.GaugeValue, float64(free))
	}
	ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(c.disk.WriteFailures()))
}
