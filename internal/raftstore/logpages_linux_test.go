package raftstore

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/policyrollout/reconciler/internal/procmem"
)

// mappedKB is this process's resident memory in mappings of path.
func mappedKB(t *testing.T, path string) int64 {
	t.Helper()
	b, err := procmem.MappedRSS(os.Getpid(), path)
	if err != nil {
		t.Fatal(err)
	}
	return b >> 10
}

// TestDropMappedLogPages: the entries a node read back from bolt (to apply
// or replicate them) stay resident in its memory map, 25 MB for a 1M-entry
// list's chunks; dropping them leaves the log readable, byte for byte.
func TestDropMappedLogPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	bs, err := raftboltdb.New(raftboltdb.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	const entries, size = 16, 512 << 10
	logs := make([]*raft.Log, entries)
	for i := range logs {
		logs[i] = &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand,
			Data: bytes.Repeat([]byte(fmt.Sprintf("entry %d ", i)), size/8)}
	}
	if err := bs.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	read := func() {
		for _, want := range logs {
			var got raft.Log
			if err := bs.GetLog(want.Index, &got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Data, want.Data) {
				t.Fatalf("entry %d read back differs", want.Index)
			}
		}
	}
	read()
	before := mappedKB(t, path)
	if before < entries*size/1024/2 {
		t.Fatalf("reading %d KiB of entries left %d KiB of the map resident: nothing to measure", entries*size/1024, before)
	}
	if err := dropMappedPages(bs); err != nil {
		t.Fatal(err)
	}
	after := mappedKB(t, path)
	t.Logf("mapped raft log resident: %d KiB -> %d KiB", before, after)
	if after > before/10 {
		t.Errorf("%d KiB of the map still resident after dropping its pages (%d before)", after, before)
	}
	read()
}
