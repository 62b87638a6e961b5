package raftstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// wholeSnapshot is how WriteSnapshot encoded before it streamed: the
// reference the streamed bytes must equal, byte for byte, because older
// nodes and existing backups read them.
func wholeSnapshot(w io.Writer, s *State) error {
	view, format := snapshotView(s)
	return json.NewEncoder(w).Encode(snapshotFile{Format: format, Summary: Summarize(s), State: view})
}

// sameSnapshotBytes fails t unless WriteSnapshot writes what wholeSnapshot
// does for s, or both refuse it.
func sameSnapshotBytes(t testing.TB, what string, s *State) {
	t.Helper()
	var want, got bytes.Buffer
	errWant, errGot := wholeSnapshot(&want, s), WriteSnapshot(&got, s)
	if (errWant != nil) != (errGot != nil) {
		t.Fatalf("%s: the encoder says %v, the stream %v", what, errWant, errGot)
	}
	if errWant != nil {
		return
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		i := 0
		for i < min(got.Len(), want.Len()) && got.Bytes()[i] == want.Bytes()[i] {
			i++
		}
		from := max(0, i-80)
		t.Fatalf("%s: streamed bytes differ at %d of %d (want %d):\n got …%s\nwant …%s", what, i, got.Len(),
			want.Len(), clipAt(got.Bytes(), from), clipAt(want.Bytes(), from))
	}
}

func clipAt(b []byte, from int) string { return string(b[from:min(len(b), from+200)]) }

// texts are the strings the generated states draw from: empty, HTML
// characters the encoder escapes, unicode, line separators, control
// bytes, invalid UTF-8, and the field marker the stream splices at.
var texts = []string{"", "a", "web", "<&>", "ünïcødé ✓", "\u2028\u2029", "\x00\x1f", "\xff\xfe", `"files":null`,
	`"data":null`, `\"`, "files", "10", "9", "policies/p/experiments/pr-1"}

func pick(r *rand.Rand) string { return texts[r.IntN(len(texts))] + texts[r.IntN(len(texts))] }

func pickBytes(r *rand.Rand) []byte {
	switch r.IntN(4) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	b := make([]byte, r.IntN(3000))
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}

func pickTime(r *rand.Rand) time.Time {
	if r.IntN(4) == 0 {
		return time.Time{}
	}
	return at(r.IntN(1 << 20)).In(time.FixedZone("z", 3600*(r.IntN(5)-2)))
}

// genMap returns nil, an empty map or up to n entries.
func genMap[K comparable, V any](r *rand.Rand, n int, key func() K, val func() V) map[K]V {
	switch r.IntN(4) {
	case 0:
		return nil
	case 1:
		return map[K]V{}
	}
	m := map[K]V{}
	for range r.IntN(n) + 1 {
		m[key()] = val()
	}
	return m
}

func genStrings(r *rand.Rand) []string {
	if r.IntN(3) == 0 {
		return nil
	}
	s := make([]string, r.IntN(4))
	for i := range s {
		s[i] = pick(r)
	}
	return s
}

func genRaw(r *rand.Rand) json.RawMessage {
	return []json.RawMessage{nil, json.RawMessage(`{}`), json.RawMessage(` { "v" : [1, 2, "<a>"] } `),
		json.RawMessage(`"\u00e9"`), json.RawMessage("null"), json.RawMessage(`{"x":"ü\u2028"}`)}[r.IntN(6)]
}

func genGeneration(r *rand.Rand, n uint64) Generation {
	strs := func() string { return pick(r) }
	return Generation{
		Number: n, State: GenerationState(pick(r)), Commit: pick(r),
		Etags:      genMap(r, 4, strs, strs),
		Files:      genMap(r, 5, strs, func() []byte { return pickBytes(r) }),
		Chunked:    genMap(r, 3, strs, func() []string { return genStrings(r) }),
		CreateTime: pickTime(r), ActivateTime: pickTime(r), StateTime: pickTime(r),
		ReadyNodes:   genMap(r, 3, strs, func() time.Time { return pickTime(r) }),
		NodeErrors:   genMap(r, 3, strs, func() []string { return genStrings(r) }),
		LeaderErrors: genStrings(r),
		History:      History{Author: pick(r), RollbackOf: uint64(r.IntN(3)), RequestedBy: pick(r)},
	}
}

// genState fills every table of a State, with nil and empty maps, every
// record type and awkward text, without going through the applier: the
// writer must reproduce whatever a state holds.
func genState(r *rand.Rand) *State {
	strs := func() string { return pick(r) }
	num := func() uint64 { return uint64(r.IntN(40)) }
	s := &State{
		Active: num(), Previous: num(), Staged: num(), Highest: num(), LastIndex: r.Uint64(),
		Nodes: genMap(r, 4, strs, func() Node {
			return Node{ID: pick(r), RaftAddr: pick(r), Group: pick(r), Voter: r.IntN(2) == 0,
				State: NodeState(pick(r)), JoinTime: pickTime(r), UpdateTime: pickTime(r)}
		}),
		Experiments: genMap(r, 4, strs, func() Experiment {
			return Experiment{Name: pick(r), Data: genRaw(r),
				Lists: genMap(r, 2, strs, func() []string { return genStrings(r) })}
		}),
		Operations: genMap(r, 3, strs, func() Operation { return Operation{ID: pick(r), Data: genRaw(r)} }),
		Dismissed:  genMap(r, 3, strs, func() Dismissal { return Dismissal{Name: pick(r), Etag: pick(r)} }),
		Sources: genMap(r, 3, strs, func() SourceStatus {
			return SourceStatus{URL: pick(r), Error: pick(r), Reason: pick(r), Since: pickTime(r), Revision: pick(r)}
		}),
		Branches: genMap(r, 3, strs, func() BranchRecord {
			return BranchRecord{Branch: pick(r), HeadCommit: pick(r), ChangedPolicies: genStrings(r),
				Validation: Validation{Valid: r.IntN(2) == 0, Errors: genStrings(r)}}
		}),
		Pulls: genMap(r, 12, func() int { return r.IntN(30) - 3 }, func() PullRecord {
			return PullRecord{Number: r.IntN(30), Title: pick(r), ChangedPolicies: genStrings(r),
				Etags: genMap(r, 2, strs, strs), Preview: pick(r), Writer: r.IntN(2) == 0,
				HeadShown: pick(r), HeadShownAt: pickTime(r), HiddenReads: genStrings(r)}
		}),
		Claims: genMap(r, 12, func() int64 { return r.Int64N(200) - 20 }, func() CommandClaim {
			return CommandClaim{CommentID: r.Int64(), PR: r.IntN(9), User: pick(r), Time: pickTime(r)}
		}),
		Chunks: genMap(r, 6, strs, func() Chunk { return Chunk{Data: pickBytes(r), For: num()} }),
	}
	s.Generations = genMap(r, 12, num, func() Generation { return Generation{} })
	for n := range s.Generations {
		s.Generations[n] = genGeneration(r, n)
	}
	return s
}

// TestWriteSnapshotBytesUnchanged: the streamed snapshot is the bytes the
// whole-value encoder wrote, for edge cases and random states in every
// format the writer emits (2 without chunks, 3 with).
func TestWriteSnapshotBytesUnchanged(t *testing.T) {
	t.Parallel()
	sameSnapshotBytes(t, "new state", NewState())
	sameSnapshotBytes(t, "zero state", &State{})
	sameSnapshotBytes(t, "empty chunk table", &State{Chunks: map[string]Chunk{}})
	sameSnapshotBytes(t, "a nil chunk", &State{Chunks: map[string]Chunk{"h": {}}})
	sameSnapshotBytes(t, "bad document", &State{Operations: map[string]Operation{"o": {Data: json.RawMessage("{")}}})
	sameSnapshotBytes(t, "keys sorted as text", &State{Pulls: map[int]PullRecord{10: {}, 9: {}, -1: {}, 100: {}},
		Generations: map[uint64]Generation{2: {}, 10: {Files: map[string][]byte{}}, 1: {Files: nil}}})
	eachGeneratedState(t, func(seed uint64, s *State) { sameSnapshotBytes(t, fmt.Sprint("seed ", seed), s) })
}

// eachGeneratedState calls f for 400 generated states, which must
// include both formats the writer emits (2 without chunks, 3 with).
func eachGeneratedState(t *testing.T, f func(seed uint64, s *State)) {
	t.Helper()
	formats := map[int]int{}
	for seed := uint64(1); seed <= 400; seed++ {
		s := genState(rand.New(rand.NewPCG(seed, 0x5a)))
		_, format := snapshotView(s)
		formats[format]++
		f(seed, s)
	}
	if formats[snapshotFormat] == 0 || formats[chunkedSnapshotFormat] == 0 {
		t.Fatalf("generated formats %v, want both 2 and 3", formats)
	}
}

// TestWriteSnapshotBytesUnchangedApplied: the same for states the applier
// built (random command sequences, chunked generations of a list).
func TestWriteSnapshotBytesUnchangedApplied(t *testing.T) {
	t.Parallel()
	eachAppliedState(t, 40, func(what string, s *State) { sameSnapshotBytes(t, what, s) })
}

// eachAppliedState calls f for states the applier built: n of random
// command sequences, then one holding chunked generations of a list.
func eachAppliedState(t *testing.T, n uint64, f func(what string, s *State)) {
	t.Helper()
	for seed := uint64(1); seed <= n; seed++ {
		r := rand.New(rand.NewPCG(seed, 0x5eed))
		h := newHarness(t, false)
		for i := range 80 {
			_ = h.apply(randomPayload(r, i))
		}
		f(fmt.Sprint("applied ", seed), h.fsm.State())
	}
	h := newHarness(t, false)
	list := netset(6, 20_000)
	stageAll(t, h, 1, bigFiles(list))
	h.mustApply(&ActivateGeneration{Generation: 1, Time: at(2)})
	stageAll(t, h, 2, bigFiles(changeLine(list)))
	f("chunked", h.fsm.State())
}

// TestWriteSnapshotMemoryBounded: writing a snapshot of a state holding a
// list of a few megabytes allocates a small fraction of the snapshot, not
// the encoded state (and its buffer's doublings). Not parallel: it reads
// the process's allocation counter.
func TestWriteSnapshotMemoryBounded(t *testing.T) {
	s := listState(t, 200_000)
	var size countWriter
	if err := WriteSnapshot(&size, s); err != nil {
		t.Fatal(err)
	}
	alloc := allocated(func() {
		if err := WriteSnapshot(io.Discard, s); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("snapshot of %d bytes allocated %d bytes", size, alloc)
	if alloc > uint64(size)/8 {
		t.Fatalf("a snapshot of %d bytes allocated %d bytes while writing", size, alloc)
	}
}

// TestWriteSnapshotWriteError: a failing writer fails the snapshot.
func TestWriteSnapshotWriteError(t *testing.T) {
	t.Parallel()
	s := listState(t, 20_000)
	for _, after := range []int{0, 10, 100 << 10} {
		err := WriteSnapshot(&failWriter{after: after}, s)
		if !errors.Is(err, errWriteFailed) {
			t.Fatalf("after %d bytes: got %v, want the writer's error", after, err)
		}
	}
}

var errWriteFailed = errors.New("disk full")

type failWriter struct{ after int }

func (w *failWriter) Write(p []byte) (int, error) {
	if len(p) > w.after {
		n := w.after
		w.after = 0
		return n, errWriteFailed
	}
	w.after -= len(p)
	return len(p), nil
}

type countWriter int

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

// allocated returns the bytes the process allocated while f ran.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// listState returns an FSM state holding an active chunked generation of
// an n-line list (n = 1,000,000 is about 16 MB).
func listState(t testing.TB, n int) *State {
	t.Helper()
	files := map[string][]byte{"_lists/blocklist.netset": netset(9, n), "web/policy.toml": []byte("name = 'web'\n")}
	chunked, chunks := splitBundle(files)
	s := NewState()
	s.Chunks = map[string]Chunk{}
	for _, c := range chunks {
		s.Chunks[c.hash] = Chunk{Data: c.data, For: 1}
	}
	cmd := mustCmd(t, &StageGeneration{Generation: 1, Commit: "c1", Chunked: chunked, CreateTime: at(1)})
	if err := (&Applier{State: s}).Apply(cmd); err != nil {
		t.Fatal(err)
	}
	if err := (&Applier{State: s}).Apply(mustCmd(t, &ActivateGeneration{Generation: 1, Time: at(2)})); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSnapshotWriterKnowsEveryField: the stream writes State's fields by
// name, so a field added to State must be added to it too.
func TestSnapshotWriterKnowsEveryField(t *testing.T) {
	t.Parallel()
	var names []string
	for f := range reflect.TypeFor[State]().Fields() {
		names = append(names, f.Tag.Get("json"))
	}
	if got, want := strings.Join(names, " "), strings.Join(stateFields, " "); got != want {
		t.Fatalf("State's JSON fields are\n%s\nthe snapshot writer writes\n%s", got, want)
	}
}

// FuzzWriteSnapshot: for any generated state, the stream equals the
// whole-value encoder.
func FuzzWriteSnapshot(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	f.Add(uint64(77), uint64(0))
	f.Fuzz(func(t *testing.T, a, b uint64) {
		sameSnapshotBytes(t, "fuzz", genState(rand.New(rand.NewPCG(a, b))))
	})
}

// stateFields are the JSON fields of State that writeState writes, in
// its order.
var stateFields = []string{"generations", "active", "previous", "staged", "highest", "nodes", "experiments",
	"operations", "dismissed,omitempty", "sources", "branches", "pulls", "claims", "chunks,omitempty", "lastIndex"}
