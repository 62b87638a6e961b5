package raftstore

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"
)

// countingProposer sends through whoever leads and counts the bytes of the
// log entries it proposes: what raft replicates to every follower.
type countingProposer struct {
	c     *cluster
	bytes int
	count int
}

func (p *countingProposer) State() *State { return p.c.leader().State() }

func (p *countingProposer) Propose(ctx context.Context, pl Payload) (Result, error) {
	for {
		s := p.c.leader()
		stampTime(pl, at(50))
		cmd, err := NewCommand(pl)
		if err != nil {
			return Result{}, err
		}
		data, _ := cmd.Marshal()
		res, err := s.Apply(ctx, cmd)
		if errors.Is(err, ErrNotLeader) {
			continue
		}
		if err == nil {
			p.bytes += len(data)
			p.count++
		}
		return res, err
	}
}

func TestClusterChunkedGeneration20MB(t *testing.T) {
	c := newCluster(t, 3, nil)
	// 28 MB through the log, JSON and base64 on every node: minutes
	// under -race on a busy machine, well under a second here otherwise.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	list := netset(7, 1_250_000) // about 20 MB of CIDR lines
	for len(list) < 20<<20 {
		list = append(list, netset(uint64(len(list)), 10_000)...)
	}
	prop := &countingProposer{c: c}
	start := time.Now()
	first := promoteChunked(ctx, t, c, prop, 1, bigFiles(list))
	t.Logf("generation 1: %d bytes of list, %d bytes in %d entries, promoted in %v", len(list), prop.bytes, prop.count, time.Since(start))

	changed := changeLine(list)
	prop.bytes, prop.count = 0, 0
	start = time.Now()
	stats := promoteChunked(ctx, t, c, prop, 2, bigFiles(changed))
	t.Logf("one-line change promoted in %v", time.Since(start))
	pct := 100 * float64(prop.bytes) / float64(len(list))
	t.Logf("one-line change: %d bytes in %d entries (%.3f%% of the list; %d chunks, %d chunk bytes)",
		prop.bytes, prop.count, pct, stats.Chunks, stats.ChunkBytes)
	if prop.bytes*100 > len(list) {
		t.Fatalf("a one-line change replicated %d bytes, over 1%% of %d", prop.bytes, len(list))
	}
	if !first.Chunked || stats.Chunks == 0 {
		t.Fatalf("stats %+v then %+v", first, stats)
	}
	for _, s := range c.stores {
		st := s.State()
		g, ok := st.ActiveGeneration()
		if !ok || g.Number != 2 || !bytes.Equal(g.Files["_lists/blocklist.netset"], changed) {
			t.Fatalf("%s: active generation %d lacks the changed list", s.ID(), g.Number)
		}
		prev, _ := st.PreviousGeneration()
		if !bytes.Equal(prev.Files["_lists/blocklist.netset"], list) {
			t.Fatalf("%s: previous generation lacks the first list", s.ID())
		}
		if &prev.Files["_lists/allow.txt"][0] != &g.Files["_lists/allow.txt"][0] {
			t.Fatalf("%s: an unchanged file is held twice", s.ID())
		}
		t.Logf("%s: %d chunks, %d chunk bytes (shared with the files)", s.ID(), len(st.Chunks), st.ChunkBytes())
	}
}

// promoteChunked stages files as generation gen through
// ProposeGeneration, reports every node ready and activates it.
func promoteChunked(ctx context.Context, t *testing.T, c *cluster, prop *countingProposer, gen uint64, files map[string][]byte) StageStats {
	t.Helper()
	_, stats, err := ProposeGeneration(ctx, prop, &StageGeneration{Generation: gen, Commit: "c",
		Files: files, Etags: map[string]string{"web": "e"}})
	if err != nil {
		t.Fatalf("stage %d: %v", gen, err)
	}
	for i := range c.stores {
		if _, err := prop.Propose(ctx, &ReportReady{Generation: gen, NodeID: c.id(i)}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := prop.Propose(ctx, &ActivateGeneration{Generation: gen})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range c.stores {
		if err := s.WaitForIndex(ctx, res.Index); err != nil {
			t.Fatalf("%s: %v", s.ID(), err)
		}
	}
	return stats
}
