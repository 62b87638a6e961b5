package preview

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestStatsPayloadIsBounded: a node's heartbeat stats fit their budget
// whatever its samples hold: whole when they fit, without samples when
// they do not, and with fewer experiments when even the counts do not.
func TestStatsPayloadIsBounded(t *testing.T) {
	big := strings.Repeat("x", 8<<10)
	ns := NodeStats{Node: "n1"}
	for i := range 40 {
		s := Stats{Experiment: fmt.Sprintf("policies/p%d/experiments/e", i), ExperimentEtag: "e1"}
		s.Evaluated = uint64(i + 1)
		for range DefaultSamples {
			s.Samples = append(s.Samples, Sample{Request: map[string]any{"path": big}})
		}
		ns.Stats = append(ns.Stats, s)
	}
	whole, _ := json.Marshal(ns)
	b, trimmed, err := ns.EncodeWithin(MaxPayloadBytes)
	if err != nil || !trimmed || len(b) > MaxPayloadBytes {
		t.Fatalf("40 experiments of %d KiB samples (%d KiB whole): %d bytes, trimmed %v, %v", len(big)>>10, len(whole)>>10, len(b), trimmed, err)
	}
	var got NodeStats
	if err := json.Unmarshal(b, &got); err != nil || len(got.Stats) != 40 || got.Stats[39].Evaluated != 40 || len(got.Stats[0].Samples) != 0 {
		t.Fatalf("the trimmed payload should keep every experiment's counts without samples: %d stats, %v", len(got.Stats), err)
	}
	if len(ns.Stats[0].Samples) != DefaultSamples {
		t.Fatal("EncodeWithin changed the node's own stats")
	}
	// Counts alone over the budget: fewer experiments, still within it.
	b, trimmed, err = ns.EncodeWithin(1 << 10)
	if err != nil || !trimmed || len(b) > 1<<10 {
		t.Fatalf("a 1 KiB budget: %d bytes, trimmed %v, %v", len(b), trimmed, err)
	}
	small := NodeStats{Node: "n1", Stats: ns.Stats[:1:1]}
	small.Stats[0].Samples = small.Stats[0].Samples[:1]
	if b, trimmed, _ := small.EncodeWithin(MaxPayloadBytes); trimmed || !strings.Contains(string(b), big) {
		t.Fatal("a payload within the budget was trimmed")
	}
}
