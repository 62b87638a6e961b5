package raftstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// recorder is a Proposer that records what it is given and commits
// nothing; NewCommand still checks every payload.
type recorder struct {
	state    *State
	proposed []Payload
	bytes    int
}

func (r *recorder) State() *State { return r.state }

func (r *recorder) Propose(_ context.Context, p Payload) (Result, error) {
	stampTime(p, at(100))
	cmd, err := NewCommand(p)
	if err != nil {
		return Result{}, err
	}
	data, _ := cmd.Marshal()
	r.bytes += len(data)
	r.proposed = append(r.proposed, p)
	return Result{}, nil
}

// netset generates n distinct CIDR lines, as a FireHOL list looks.
func netset(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, 0, n*17+32)
	b = append(b, "# generated blocklist\n"...)
	for range n {
		v := r.Uint64()
		b = strconv.AppendUint(b, v%224, 10)
		b = append(b, '.')
		b = strconv.AppendUint(b, v>>8&255, 10)
		b = append(b, '.')
		b = strconv.AppendUint(b, v>>16&255, 10)
		b = append(b, ".0/"...)
		b = strconv.AppendUint(b, 16+v>>24%9, 10)
		b = append(b, '\n')
	}
	return b
}

// changeLine returns data with a new line inserted in its middle.
func changeLine(data []byte) []byte {
	mid := bytes.IndexByte(data[len(data)/2:], '\n') + len(data)/2 + 1
	out := append([]byte{}, data[:mid]...)
	out = append(out, "203.0.113.0/24\n"...)
	return append(out, data[mid:]...)
}

func TestSplitChunksAtLinesAndBounded(t *testing.T) {
	data := netset(1, 200_000)
	chunks := SplitChunks(data)
	if got := bytes.Join(chunks, nil); !bytes.Equal(got, data) {
		t.Fatal("chunks do not join back to the data")
	}
	for i, c := range chunks {
		if len(c) > MaxChunkBytes {
			t.Fatalf("chunk %d is %d bytes, over %d", i, len(c), MaxChunkBytes)
		}
		if i < len(chunks)-1 && (c[len(c)-1] != '\n' || len(c) < chunkMinBytes) {
			t.Fatalf("chunk %d (%d bytes) does not end a line past the minimum", i, len(c))
		}
	}
	t.Logf("%d bytes in %d chunks, %d on average", len(data), len(chunks), len(data)/len(chunks))
	// A line without newlines is cut at the limit.
	long := bytes.Repeat([]byte("x"), 3*MaxChunkBytes+5)
	if got := SplitChunks(long); len(got) != 4 || len(got[0]) != MaxChunkBytes {
		t.Fatalf("a 3.x-chunk line without newline: %d chunks", len(got))
	}
}

func TestSplitChunksOneLineChangeMovesOneChunk(t *testing.T) {
	data := netset(2, 200_000)
	old := map[string]bool{}
	for _, c := range SplitChunks(data) {
		old[ChunkHash(c)] = true
	}
	changed := 0
	for _, c := range SplitChunks(changeLine(data)) {
		if !old[ChunkHash(c)] {
			changed += len(c)
		}
	}
	t.Logf("one inserted line: %d new chunk bytes of %d (%.3f%%)", changed, len(data), 100*float64(changed)/float64(len(data)))
	if changed == 0 || changed > 2*MaxChunkBytes {
		t.Fatalf("one inserted line changed %d chunk bytes", changed)
	}
}

// chunkedStage returns the PutChunks and the Stage ProposeGeneration
// would send for files, given the chunks already held.
func chunkedStage(t *testing.T, gen uint64, sec int, files map[string][]byte, held map[string]Chunk) ([]*PutChunks, *StageGeneration) {
	t.Helper()
	rec := &recorder{state: &State{Chunks: held}}
	p := &StageGeneration{Generation: gen, Commit: fmt.Sprintf("c%d", gen), Files: files,
		Etags: map[string]string{"web": "e"}, CreateTime: at(sec)}
	chunked, chunks := splitBundle(files)
	if _, err := putChunks(ctxT(t), rec, gen, chunks, held); err != nil {
		t.Fatal(err)
	}
	var puts []*PutChunks
	for _, q := range rec.proposed {
		puts = append(puts, q.(*PutChunks))
	}
	stage := *p
	stage.Files, stage.Chunked = nil, chunked
	return puts, &stage
}

func bigFiles(list []byte) map[string][]byte {
	return map[string][]byte{"_lists/blocklist.netset": list, "web/policy.toml": []byte("name = 'web'\n"),
		"_lists/allow.txt": bytes.Repeat([]byte("partner.example\n"), 1000)}
}

func TestFSMChunkedStage(t *testing.T) {
	h := newHarness(t, false)
	files := bigFiles(netset(3, 50_000))
	puts, st := chunkedStage(t, 1, 1, files, nil)
	// A Stage before its chunks is refused and changes nothing.
	if err := h.apply(st); !errors.Is(err, ErrMissingChunk) {
		t.Fatalf("stage before chunks: %v, want ErrMissingChunk", err)
	}
	for _, p := range puts {
		h.mustApply(p)
	}
	cmd := mustCmd(t, st)
	if cmd.Version != StageChunkedVersion {
		t.Fatalf("chunked stage written at version %d", cmd.Version)
	}
	if err := h.applyCmd(cmd); err != nil {
		t.Fatal(err)
	}
	g, _ := h.fsm.State().StagedGeneration()
	for path, want := range files {
		if !bytes.Equal(g.Files[path], want) {
			t.Fatalf("%s reassembled differs", path)
		}
	}
	// Version 1 never carries chunks: an old build would refuse the field.
	cmd.Version = 1
	st2 := *st
	st2.Generation = 2
	cmd.Payload, _ = json.Marshal(st2)
	if err := h.applyCmd(cmd); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("chunked version 1 stage: %v", err)
	}
}

func TestSmallStageStaysVersion1(t *testing.T) {
	cmd := mustCmd(t, stage(1, 1))
	if cmd.Version != 1 || strings.Contains(string(cmd.Payload), "chunked") {
		t.Fatalf("small stage: version %d payload %s", cmd.Version, cmd.Payload)
	}
	rec := &recorder{state: NewState()}
	if _, stats, err := ProposeGeneration(ctxT(t), rec, stage(1, 1)); err != nil || stats.Chunked || len(rec.proposed) != 1 {
		t.Fatalf("small generation: stats %+v, %d commands, %v", stats, len(rec.proposed), err)
	}
	big := stage(1, 1)
	big.Files = map[string][]byte{"_lists/huge.txt": make([]byte, MaxGenerationBytes)}
	_, _, err := ProposeGeneration(ctxT(t), rec, big)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "MaxGenerationBytes") {
		t.Fatalf("over MaxGenerationBytes: %v", err)
	}
}

func TestFSMChunksSharedAndCollected(t *testing.T) {
	h := newHarness(t, false)
	list1 := netset(4, 50_000)
	files1 := bigFiles(list1)
	stageAll(t, h, 1, files1)
	h.mustApply(&ActivateGeneration{Generation: 1, Time: at(2)})

	files2 := bigFiles(changeLine(list1))
	puts, _ := stageAll(t, h, 2, files2)
	sent := 0
	for _, p := range puts {
		for _, c := range p.Chunks {
			sent += len(c)
		}
	}
	t.Logf("one-line change: %d chunk bytes put for a %d byte list", sent, len(list1))
	if sent == 0 || sent > 2*MaxChunkBytes {
		t.Fatalf("one-line change put %d bytes", sent)
	}
	s := h.fsm.State()
	g1, g2 := s.Generations[1], s.Generations[2]
	if &g1.Files["_lists/allow.txt"][0] != &g2.Files["_lists/allow.txt"][0] {
		t.Fatal("an unchanged file is held twice")
	}
	// Every chunk points into a reassembled file: no second copy.
	for hash, c := range s.Chunks {
		if !insideAFile(c.Data, s) {
			t.Fatalf("chunk %s holds its own copy", hash)
		}
	}
	h.mustApply(&ActivateGeneration{Generation: 2, Time: at(4)})
	stageAll(t, h, 3, bigFiles(netset(5, 50_000)))
	h.mustApply(&ActivateGeneration{Generation: 3, Time: at(6)})
	// Generation 1 lost its files: chunks only it used are gone, and
	// every chunk held is one a kept generation uses.
	s = h.fsm.State()
	used := map[string]bool{}
	for _, g := range s.Generations {
		if g.Files == nil {
			continue
		}
		for _, hs := range g.Chunked {
			for _, c := range hs {
				used[c] = true
			}
		}
	}
	for c := range s.Chunks {
		if !used[c] {
			t.Fatalf("chunk %s held after no kept generation uses it", c)
		}
	}
	for _, c := range g1.Chunked["_lists/blocklist.netset"] {
		if _, ok := s.Chunks[c]; ok && !used[c] {
			t.Fatalf("generation 1's chunk %s not collected", c)
		}
	}
	// Chunks put for a Stage to come survive collection; stale ones are
	// refused.
	h.mustApply(&PutChunks{Generation: 9, Chunks: [][]byte{[]byte("pending\n")}})
	h.mustApply(&MarkInvalid{Generation: 4, Commit: "x", Errors: []string{"bad"}, Time: at(7)})
	if _, ok := h.fsm.State().Chunks[ChunkHash([]byte("pending\n"))]; !ok {
		t.Fatal("a chunk put for a later stage was collected")
	}
	if err := h.apply(&PutChunks{Generation: 3, Chunks: [][]byte{[]byte("late")}}); !errors.Is(err, ErrGenerationNotNewer) {
		t.Fatalf("chunks for an old generation: %v", err)
	}
}

// stageAll applies the PutChunks and Stage of a chunked generation.
func stageAll(t *testing.T, h *fsmHarness, gen uint64, files map[string][]byte) ([]*PutChunks, *StageGeneration) {
	t.Helper()
	puts, st := chunkedStage(t, gen, int(gen)*2-1, files, h.fsm.State().Chunks)
	for _, p := range puts {
		h.mustApply(p)
	}
	h.mustApply(st)
	return puts, st
}

func TestFSMSnapshotRestoreChunks(t *testing.T) {
	h := newHarness(t, false)
	list := netset(6, 50_000)
	stageAll(t, h, 1, bigFiles(list))
	h.mustApply(&ActivateGeneration{Generation: 1, Time: at(2)})
	stageAll(t, h, 2, bigFiles(changeLine(list)))
	var buf bytes.Buffer
	if err := WriteSnapshot(&buf, h.fsm.State()); err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot %d bytes for two generations of a %d byte list", buf.Len(), len(list))
	if buf.Len() > len(list)*3/2 {
		t.Fatalf("snapshot of %d bytes holds the files more than once", buf.Len())
	}
	f2 := NewFSM(FSMConfig{})
	if err := f2.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	want, got := h.fsm.State(), f2.State()
	for _, n := range []uint64{1, 2} {
		for path, b := range want.Generations[n].Files {
			if !bytes.Equal(got.Generations[n].Files[path], b) {
				t.Fatalf("generation %d: %s differs after restore", n, path)
			}
		}
	}
	if len(got.Chunks) != len(want.Chunks) {
		t.Fatalf("restored %d chunks, want %d", len(got.Chunks), len(want.Chunks))
	}
	for hash, c := range got.Chunks {
		if !insideAFile(c.Data, got) {
			t.Fatalf("restored chunk %s holds its own copy", hash)
		}
	}
	g1, g2 := got.Generations[1], got.Generations[2]
	if &g1.Files["_lists/allow.txt"][0] != &g2.Files["_lists/allow.txt"][0] {
		t.Fatal("restored generations hold an unchanged file twice")
	}
	// The restored node takes the next one-line change like the others.
	h2 := &fsmHarness{t: t, fsm: f2, index: h.index}
	h2.mustApply(&ActivateGeneration{Generation: 2, Time: at(4)})
	stageAll(t, h2, 3, bigFiles(changeLine(changeLine(list))))
}

func FuzzPutChunksDecode(f *testing.F) {
	seed, _ := json.Marshal(PutChunks{Generation: 3, Chunks: [][]byte{[]byte("10.0.0.0/8\n")}})
	f.Add(seed)
	f.Add([]byte(`{"generation":1,"chunks":[""]}`))
	f.Add([]byte(`{"generation":1,"chunks":null,"x":1}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		s := NewState()
		a := Applier{State: s}
		err := a.Apply(Command{Type: TypePutChunks, Version: 1, Payload: raw})
		if err != nil {
			if len(s.Chunks) != 0 {
				t.Fatal("a refused PutChunks changed the state")
			}
			return
		}
		for h, c := range s.Chunks {
			if ChunkHash(c.Data) != h || len(c.Data) == 0 || len(c.Data) > MaxChunkBytes {
				t.Fatalf("chunk %s held wrongly (%d bytes)", h, len(c.Data))
			}
		}
	})
}

// insideAFile reports whether b's bytes lie inside the buffer of a file of
// a generation of s.
func insideAFile(b []byte, s *State) bool {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	for _, g := range s.Generations {
		for _, f := range g.Files {
			start := uintptr(unsafe.Pointer(unsafe.SliceData(f)))
			if p >= start && p+uintptr(len(b)) <= start+uintptr(len(f)) {
				return true
			}
		}
	}
	return false
}

// BenchmarkSplitChunks is the leader's cost of cutting a 16 MB list.
func BenchmarkSplitChunks(b *testing.B) {
	data := netset(8, 1_000_000)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		SplitChunks(data)
	}
}

// BenchmarkApplyChunkedStage is a node's cost of applying the Stage of a
// 16 MB list whose chunks it holds: the reassembly copy, on raft's FSM
// goroutine.
func BenchmarkApplyChunkedStage(b *testing.B) {
	files := map[string][]byte{"_lists/blocklist.netset": netset(9, 1_000_000)}
	chunked, chunks := splitBundle(files)
	base := NewState()
	var puts [][]byte
	for _, c := range chunks {
		puts = append(puts, c.data)
	}
	if err := (&Applier{State: base}).Apply(mustCmd(b, &PutChunks{Generation: 1, Chunks: puts[:1]})); err != nil {
		b.Fatal(err)
	}
	for _, c := range chunks {
		base.Chunks[c.hash] = Chunk{Data: c.data, For: 1}
	}
	cmd := mustCmd(b, &StageGeneration{Generation: 1, Commit: "c", Chunked: chunked, CreateTime: at(1)})
	b.SetBytes(int64(len(files["_lists/blocklist.netset"])))
	for b.Loop() {
		if err := (&Applier{State: base.Clone()}).Apply(cmd); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzChunkedStage feeds arbitrary version-2 Stage payloads to a state
// holding chunks: a refused one changes nothing, an accepted one
// reassembles every file from exactly its chunks.
func FuzzChunkedStage(f *testing.F) {
	a, b := []byte("10.0.0.0/8\n"), []byte("192.0.2.0/24\n")
	seed, _ := json.Marshal(StageGeneration{Generation: 2, Commit: "c", CreateTime: at(1),
		Chunked: map[string][]string{"_lists/x.netset": {ChunkHash(a), ChunkHash(b)}, "e.txt": {}}})
	f.Add(seed)
	f.Add([]byte(`{"generation":2,"commit":"c","createTime":"2026-01-01T00:00:00Z","chunked":{"a":["00"]}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		s := NewState()
		if err := (&Applier{State: s}).Apply(mustCmd(t, &PutChunks{Generation: 2, Chunks: [][]byte{a, b}})); err != nil {
			t.Fatal(err)
		}
		before := jsonOf(t, s)
		if err := (&Applier{State: s}).Apply(Command{Type: TypeStageGeneration, Version: 2, Payload: raw}); err != nil {
			if jsonOf(t, s) != before {
				t.Fatal("a refused stage changed the state")
			}
			return
		}
		g, _ := s.StagedGeneration()
		for path, hashes := range g.Chunked {
			var want []byte
			for _, h := range hashes {
				want = append(want, s.Chunks[h].Data...)
			}
			if !bytes.Equal(g.Files[path], want) {
				t.Fatalf("%s differs from its chunks", path)
			}
		}
	})
}
