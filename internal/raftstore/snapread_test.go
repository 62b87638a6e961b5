package raftstore

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// wholeDecode is how readSnapshot decoded before the first pass: the
// whole document by json.Decoder. It is the reference the two-pass
// reader must equal.
func wholeDecode(r io.Reader) (*snapshotFile, error) {
	var file snapshotFile
	if err := json.NewDecoder(r).Decode(&file); err != nil {
		return nil, fmt.Errorf("decode snapshot: %w", err)
	}
	return &file, nil
}

// sameRead fails t unless the two-pass reader decodes doc to what the
// whole-document reader does (the document itself, then the finished
// state and the names it dropped), or both refuse it.
func sameRead(t testing.TB, what string, doc []byte) {
	t.Helper()
	wantFile, errWant := wholeDecode(bytes.NewReader(doc))
	gotFile, errGot := decodeSnapshotFile(bytes.NewReader(doc))
	if (errWant != nil) != (errGot != nil) {
		t.Fatalf("%s: the whole reader says %v, the two-pass one %v\n%s", what, errWant, errGot, clipDoc(doc))
	}
	if errGot != nil {
		return
	}
	if !reflect.DeepEqual(gotFile, wantFile) {
		t.Fatalf("%s: decoded documents differ\n%s", what, clipDoc(doc))
	}
	want, wantDropped, errWant := finishSnapshot(wantFile)
	got, gotDropped, errGot := finishSnapshot(gotFile)
	if (errWant != nil) != (errGot != nil) {
		t.Fatalf("%s: the whole reader says %v, the two-pass one %v\n%s", what, errWant, errGot, clipDoc(doc))
	}
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotDropped, wantDropped) {
		t.Fatalf("%s: restored states differ\n%s", what, clipDoc(doc))
	}
}

func bufioReader(doc string) *bufio.Reader { return bufio.NewReader(strings.NewReader(doc)) }

func clipDoc(b []byte) string { return string(b[:min(len(b), 600)]) }

func snapshotBytes(t testing.TB, s *State) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteSnapshot(&b, s); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestReadSnapshotSameAsWhole: generated states of every shape, in the
// formats the writer emits (2 and 3), and their first bytes.
func TestReadSnapshotSameAsWhole(t *testing.T) {
	t.Parallel()
	eachGeneratedState(t, func(seed uint64, s *State) {
		doc := snapshotBytes(t, s)
		sameRead(t, fmt.Sprint("seed ", seed), doc)
		if seed%40 == 0 {
			for n := 0; n < len(doc); n += 1 + len(doc)/300 {
				sameRead(t, fmt.Sprint("seed ", seed, " cut at ", n), doc[:n])
			}
		}
	})
}

// TestReadSnapshotSameAsWholeApplied: states the applier built, chunked
// generations of a list among them, and the format-1 snapshot in
// testdata.
func TestReadSnapshotSameAsWholeApplied(t *testing.T) {
	t.Parallel()
	eachAppliedState(t, 20, func(what string, s *State) { sameRead(t, what, snapshotBytes(t, s)) })

	v1, err := filepath.Glob(filepath.Join("testdata", "*", "snapshots", "*", "state.bin"))
	if err != nil || len(v1) == 0 {
		t.Fatalf("no testdata snapshots: %v", err)
	}
	for _, name := range v1 {
		doc, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		sameRead(t, name, doc)
	}
}

// oddDocuments are documents the writer never writes, around the strings
// the first pass replaces: B is a long base64 string.
func oddDocuments() []string {
	raw := make([]byte, 700)
	for i := range raw {
		raw[i] = byte(i * 7)
	}
	b := base64.StdEncoding.EncodeToString(raw)
	chunk := func(data string) string {
		return `{"format":3,"state":{"generations":{"1":{"number":1,"files":{},"chunked":{"f":["h"]}}},` +
			`"chunks":{"h":{"data":` + data + `,"for":1}}}}`
	}
	inline := func(files string) string {
		return `{"format":2,"state":{"generations":{"1":{"number":1,"files":` + files + `}},"active":1}}`
	}
	q := `"` + b + `"`
	docs := []string{
		chunk(q), inline(`{"f":` + q + `}`), "{\"format\":1,\"state\":{\"generations\":{\"1\":{\"files\":{\"f\":" + q + "}}}}}",
		// Keys in other cases, escaped, and folded only by unicode.
		`{"FORMAT":3,"State":{"GENERATIONS":{"1":{"Files":{}, "chunked":{"f":["h"]}}},"cHuNkS":{"h":{"DATA":` + q + `}}}}`,
		`{"format":2,"st\u0061te":{"generations":{"1":{"fil\u0065s":{"f":` + q + `}}}}}`,
		`{"format":2,"ſtate":{"generations":{"1":{"files":{"f":` + q + `}}}}}`,
		`{"format":3,"state":{"chun` + "\u212a" + `s":{"h":{"data":` + q + `}}}}`,
		`{"format":2,"state":{"generations":{"1":{"files":{"f":` + q + `}}}},"state":{"generations":{"1":{"files":{"g":` + q + `}}}}}`,
		// Duplicate keys: the last value wins, maps merge.
		chunk(q + `,"data":null`), chunk(`null,"data":` + q), chunk(q + `,"data":` + q[:len(q)-5] + `A="`),
		`{"format":3,"state":{"chunks":{"h":{"data":` + q + `},"h":{"for":2}}}}`,
		inline(`{"f":` + q + `,"f":"QQ=="}`), inline(`{"f":` + q + `},"files":{"g":` + q + `}`),
		// Nulls, empty strings and short strings where bytes are.
		chunk(`null`), chunk(`""`), chunk(`"QUJD"`), inline(`null`), inline(`{"f":null}`), inline(`{"f":""}`),
		// Unknown fields holding long strings, valid base64 or not.
		`{"format":3,"state":{"chunks":{"h":{"data":` + q + `,"date":` + q + `,"x":"` + b + `!"}},"chunkz":{"h":{"data":` + q + `}}}}`,
		`{"format":2,"unknown":` + q + `,"state":{"generations":{"1":{"filez":{"f":"*` + b + `"}}}}}`,
		// Long base64 strings on paths like the bulk ones: raw JSON (an
		// operation's or experiment's data), strings, unknown fields.
		`{"format":2,"state":{"operations":{"o":{"id":"o","data":` + q + `}},"experiments":{"e":{"data":` + q + `}}}}`,
		`{"format":2,"state":{"nodes":{"n":{"data":` + q + `,"id":` + q + `}},"generations":{"1":{"data":` + q + `}}}}`,
		`{"format":2,"state":{"chunks":{"h":{"files":{"f":` + q + `}}},"nodes":{"n":{"files":{"f":` + q + `}}}}}`,
		`{"format":2,"state":{"generations":{"1":{"etags":{"f":` + q + `},"files":{"f":` + q + `}}}}}`,
		`{"format":3,"summary":{"data":` + q + `},"data":` + q + `,"state":{"generations":{"1":{"chunked":{"f":[` + q + `]}}}}}`,
		// Wrong types.
		chunk(`123`), chunk(`[` + q + `]`), chunk(`{"a":` + q + `}`), chunk(`true`),
		`{"format":3,"state":{"chunks":[{"data":` + q + `}]}}`, `{"format":3,"state":{"chunks":{"h":[` + q + `]}}}`,
		`{"format":2,"state":` + q + `}`, `{"format":2,"state":{"generations":{"x":{"files":{"f":` + q + `}}}}}`,
		`{"format":2,"state":{"generations":{"1":{"files":` + q + `}}}}`, `{"format":"2","state":{}}`,
		`{"format":2,"state":{"active":` + q + `}}`, `{"format":2,"state":{"generations":{"1":{"commit":` + q + `}}}}`,
		`{"format":2,"state":{"nodes":{"n":{"id":` + q + `}}}}`,
		// Base64 the decoder refuses or reads only after unescaping.
		chunk(q[:len(q)-2] + `!"`), chunk(q[:len(q)-3] + `"`), chunk(`"` + b[:100] + `=` + b[100:] + `"`),
		chunk(`"` + b[:len(b)-4] + `QQ"`), chunk(`"` + b[:len(b)-4] + `QR=="`), chunk(`"` + b[:len(b)-4] + `QQ=="`),
		chunk(`"` + b[:200] + `\n` + b[200:] + `"`), chunk(`"` + strings.ReplaceAll(b, "/", `\/`) + `"`),
		chunk(`"` + b[:200] + `\u0041` + b[201:] + `"`), chunk(`"` + b[:200] + ` ` + b[200:] + `"`),
		chunk(`"` + b[:200] + "\xff" + b[200:] + `"`), chunk(`"` + b[:200] + `\"` + b[200:] + `"`),
		// Syntax: truncation, trailing bytes, other top-level values, depth.
		chunk(q) + `garbage`, chunk(q) + chunk(q), chunk(q)[:len(chunk(q))-1], `  ` + chunk(q) + "\n\n",
		chunk(q + `,`), chunk(q + `}`), chunk(q + ` ` + q), `{"format":3,"state":{"chunks":{"h":{"data" ` + q + `}}}}`,
		`{"format":3,"state":{"chunks":{"h":{` + q + `:"data"}}}}`, `[` + q + `]`, q, `123`, ``, `   `, `null`,
		`{"format":3,"state":{"chunks":{"h":{"data":` + q, `{"format":3,"state":{"chunks":{"h":{"data":"` + b[:300],
		`{"format":2,"state":{"generations":{"1":{"files":{"f":{"g":{"h":[[[` + q + `]]]}}}}}}}`,
		`{"format":2,"state":{"operations":{"o":{"data":[[[[[[{"files":` + q + `}]]]]]]}}}}`,
		`{"format":2,"state":{"generations":{"1":{"files":{"f":` + q + `}}}` + strings.Repeat(`}`, 20),
		`{"format":2,"state":{"generations":{"1":{"files":{"f":` + q + `}}}}}` + strings.Repeat(`]`, 20),
		`{"format":2,"state":{"generations":{"1":{"files":{"f":` + q + `}}}}]`,
		`{"format":2,"state":{"experiments":{"e":{"name":"` + strings.Repeat(`\\`, 300) + `"}},"generations":{"1":{"files":{"f":` + q + `}}}}}`,
		`{"format":2,"state":{"experiments":{"e":{"name":"x\\\"` + b + `\\"}},"generations":{"1":{"files":{"f":` + q + `}}}}}`,
	}
	return docs
}

// TestReadSnapshotOddDocuments: what the whole reader makes of keys in
// other cases, duplicate keys, nulls, unknown fields, wrong types, bad
// base64 and broken syntax, the two-pass reader makes too, and of every
// prefix of each.
func TestReadSnapshotOddDocuments(t *testing.T) {
	t.Parallel()
	replaced := 0
	for i, doc := range oddDocuments() {
		sameRead(t, fmt.Sprint("document ", i), []byte(doc))
		for n := range len(doc) {
			sameRead(t, fmt.Sprint("document ", i, " cut at ", n), []byte(doc[:n]))
		}
		sr := &snapReducer{in: bufioReader(doc)}
		sr.reduce()
		replaced += len(sr.blobs)
	}
	// The documents must exercise the replacement, not only the fallback.
	if replaced < 20 {
		t.Fatalf("the first pass replaced %d strings in the odd documents", replaced)
	}
}

// TestReadSnapshotReadError: a reader that fails part way fails both
// readers, and one that fails only after the document fails neither.
func TestReadSnapshotReadError(t *testing.T) {
	t.Parallel()
	doc := snapshotBytes(t, genState(rand.New(rand.NewPCG(3, 0x5a))))
	boom := errors.New("disk on fire")
	for n := 0; n <= len(doc); n += 1 + len(doc)/200 {
		read := func() io.Reader { return io.MultiReader(bytes.NewReader(doc[:n]), iotest.ErrReader(boom)) }
		_, errWant := wholeDecode(read())
		_, errGot := decodeSnapshotFile(read())
		if (errWant != nil) != (errGot != nil) || (errGot != nil && !errors.Is(errGot, boom)) {
			t.Fatalf("cut at %d of %d: the whole reader says %v, the two-pass one %v", n, len(doc), errWant, errGot)
		}
	}
	r := io.MultiReader(bytes.NewReader(doc), iotest.ErrReader(boom))
	if _, err := decodeSnapshotFile(r); err != nil {
		t.Fatalf("an error after the document: %v", err)
	}
}

// TestReadSnapshotMemoryBounded: restoring a snapshot of a list of a few
// megabytes allocates about the state it builds (the chunks and the file
// they make), not also the document and its decoder's buffer doublings.
// Not parallel: it reads the process's allocation counter.
func TestReadSnapshotMemoryBounded(t *testing.T) {
	s := listState(t, 200_000)
	doc := snapshotBytes(t, s)
	var built uint64
	for _, c := range s.Chunks {
		built += uint64(len(c.Data))
	}
	alloc := allocated(func() {
		if _, err := ReadSnapshot(bytes.NewReader(doc)); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("snapshot of %d bytes (%d of chunks) allocated %d bytes", len(doc), built, alloc)
	// The chunks, the file reassembled from them, and slack for the rest.
	if limit := 2*built + built/2; alloc > limit {
		t.Fatalf("a snapshot of %d bytes allocated %d bytes while restoring (limit %d)", len(doc), alloc, limit)
	}
}

// FuzzReadSnapshot: for any bytes, mutated from snapshots and the odd
// documents, the two-pass reader agrees with the whole reader.
func FuzzReadSnapshot(f *testing.F) {
	for seed := uint64(1); seed <= 8; seed++ {
		var b bytes.Buffer
		if err := WriteSnapshot(&b, genState(rand.New(rand.NewPCG(seed, 0x5a)))); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
	}
	for _, doc := range oddDocuments() {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		sameRead(t, "fuzz", doc)
	})
}
