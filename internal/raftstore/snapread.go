package raftstore

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
)

// The snapshot is read in two passes so that restoring it holds the
// decoded bytes and not also the document. json.Decoder buffers the whole
// document before decoding it, and a 21 MB snapshot of a 16 MB list cost
// 87 MB of transient heap on every restart and every InstallSnapshot
// (BenchmarkReadSnapshotList).
//
// The first pass (this file) copies the document to a reduced form in
// which each long base64 string where the bulk lives, a chunk's data
// (state.chunks.*.data) and an inline generation file
// (state.generations.*.files.*), is decoded as it is read and replaced by
// a short placeholder; the second pass is encoding/json decoding the
// reduced document into snapshotFile, exactly as before, and the
// placeholders are then swapped for their bytes. encoding/json still
// decides everything about the document (key case, duplicate keys, nulls,
// unknown fields, type errors, syntax errors, trailing bytes); the first
// pass only has to be right about three things, each chosen so that being
// unsure means leaving the string as it is:
//
//   - Which strings land in those []byte fields. The path is tracked
//     through objects only, and a key matches when it is the field's name
//     in ASCII letters of any case without escapes (encoding/json matches
//     that and more, so a key it matches and this does not only keeps its
//     string).
//   - That encoding/json would decode the string to the same bytes: it is
//     replaced only when every byte is in the base64 alphabet (nothing to
//     unescape) and base64.StdEncoding decodes it, as encoding/json does.
//     Otherwise it stays and encoding/json reports what it reports.
//   - That the replacement changes nothing else: a string is swapped for
//     a string, so the reduced document has the same structure and the
//     same syntax errors. Scanning stops at the end of the first value and
//     the rest of the input follows the reduced document unread, as
//     json.Decoder would meet it.
//
// A placeholder is the base64 of a nonce drawn per read and the blob's
// index, so no content of a snapshot can pass for one.
// snapread_test.go compares the result with the whole-document decoder.

// snapshotReadBuffer is the read buffer of the first pass.
const snapshotReadBuffer = 64 << 10

// bulkStringBytes is the shortest string the first pass replaces: below
// it the placeholder (32 characters) saves little.
const bulkStringBytes = 256

// snapshotPathDepth is the deepest object the bulk paths go through;
// below it only strings and nesting are tracked.
const snapshotPathDepth = 5

// memberKey is what the first pass knows of an object member's key.
type memberKey uint8

const (
	keyOther memberKey = iota
	keyState
	keyGenerations
	keyFiles
	keyChunks
	keyData
)

var memberKeys = []struct {
	key  memberKey
	name string
}{{keyState, "state"}, {keyGenerations, "generations"}, {keyFiles, "files"}, {keyChunks, "chunks"}, {keyData, "data"}}

// level is one open container of the first pass, down to snapshotPathDepth.
type level struct {
	object    bool
	expectKey bool
	key       memberKey
}

type snapReducer struct {
	in    *bufio.Reader
	out   bytes.Buffer
	stack []level
	// deeper counts the containers open below snapshotPathDepth.
	deeper int
	raw    []byte
	// err is the read error that stopped the first pass, if any.
	err   error
	nonce [16]byte
	blobs [][]byte
}

// decodeSnapshotFile decodes the snapshotFile r holds, as
// json.NewDecoder(r).Decode would, holding the bulk bytes once.
func decodeSnapshotFile(r io.Reader) (*snapshotFile, error) {
	sr := &snapReducer{in: bufio.NewReaderSize(r, snapshotReadBuffer)}
	if _, err := rand.Read(sr.nonce[:]); err != nil {
		return nil, fmt.Errorf("decode snapshot: %w", err)
	}
	sr.reduce()
	if sr.err != nil && sr.err != io.EOF {
		// Returned as json.Decoder would have: a bufio.Reader reports an
		// error once, and the decoder must not read on past it.
		return nil, fmt.Errorf("decode snapshot: %w", sr.err)
	}
	var file snapshotFile
	err := json.NewDecoder(io.MultiReader(&sr.out, sr.in)).Decode(&file)
	if err != nil {
		return nil, fmt.Errorf("decode snapshot: %w", err)
	}
	sr.swap(file.State)
	return &file, nil
}

// reduce copies the first JSON value of the input to out, replacing bulk
// strings. It stops at the end of that value, at a read error (the
// decoder then meets the same end), or at a top-level value that is not
// an object (nothing to replace).
func (sr *snapReducer) reduce() {
	for {
		c, err := sr.in.ReadByte()
		if err != nil {
			sr.err = err
			return
		}
		if c == '"' {
			if !sr.str() || len(sr.stack) == 0 {
				return
			}
			continue
		}
		sr.out.WriteByte(c)
		switch c {
		case ' ', '\t', '\n', '\r':
		case '{', '[':
			if len(sr.stack) < snapshotPathDepth && sr.deeper == 0 {
				sr.stack = append(sr.stack, level{object: c == '{', expectKey: c == '{'})
			} else {
				sr.deeper++
			}
		case '}', ']':
			switch {
			case sr.deeper > 0:
				sr.deeper--
			case len(sr.stack) > 0:
				sr.stack = sr.stack[:len(sr.stack)-1]
			}
			if len(sr.stack) == 0 {
				return
			}
		case ',':
			if top := sr.top(); top != nil && top.object {
				top.expectKey, top.key = true, keyOther
			}
		default:
			if len(sr.stack) == 0 {
				return
			}
		}
	}
}

func (sr *snapReducer) top() *level {
	if sr.deeper > 0 || len(sr.stack) == 0 {
		return nil
	}
	return &sr.stack[len(sr.stack)-1]
}

// str handles a string whose opening quote was read: a key, a bulk value
// or any other string. It returns false when the input ended inside it.
func (sr *snapReducer) str() bool {
	ok, alphabet := sr.readString()
	top := sr.top()
	switch {
	case top != nil && top.object && top.expectKey:
		top.expectKey, top.key = false, keyOf(sr.raw)
	case ok && alphabet && len(sr.raw) >= bulkStringBytes && sr.atBulkPath():
		b := make([]byte, base64.StdEncoding.DecodedLen(len(sr.raw)))
		if n, err := base64.StdEncoding.Decode(b, sr.raw); err == nil {
			var p [24]byte
			copy(p[:], sr.nonce[:])
			binary.BigEndian.PutUint64(p[16:], uint64(len(sr.blobs)))
			sr.blobs = append(sr.blobs, b[:n])
			sr.out.WriteByte('"')
			sr.out.WriteString(base64.StdEncoding.EncodeToString(p[:]))
			sr.out.WriteByte('"')
			return true
		}
	}
	sr.out.WriteByte('"')
	sr.out.Write(sr.raw)
	if ok {
		sr.out.WriteByte('"')
	}
	return ok
}

// readString reads a string's content, up to its closing quote (read, not
// kept), into sr.raw. It reports whether the quote came and whether every
// byte is of the base64 alphabet.
func (sr *snapReducer) readString() (closed, alphabet bool) {
	sr.raw = sr.raw[:0]
	for {
		chunk, err := sr.in.ReadSlice('"')
		sr.raw = append(sr.raw, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			sr.err = err
			return false, false
		}
		// A quote after an odd run of backslashes is escaped.
		n := len(sr.raw) - 1
		run := 0
		for run < n && sr.raw[n-1-run] == '\\' {
			run++
		}
		if run%2 == 0 {
			sr.raw = sr.raw[:n]
			break
		}
	}
	for _, c := range sr.raw {
		if !isBase64Byte(c) {
			return true, false
		}
	}
	return true, true
}

func isBase64Byte(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '='
}

// keyOf names a key the bulk paths go through: its ASCII letters in any
// case, no escapes. encoding/json folds more (the Kelvin sign, the long
// s); those keys are left to it.
func keyOf(raw []byte) memberKey {
	for _, k := range memberKeys {
		if asciiFold(raw, k.name) {
			return k.key
		}
	}
	return keyOther
}

func asciiFold(b []byte, name string) bool {
	if len(b) != len(name) {
		return false
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != name[i] {
			return false
		}
	}
	return true
}

// atBulkPath reports whether a value read now lands in Chunk.Data
// (state.chunks.*.data) or a generation's file (state.generations.*.files.*).
func (sr *snapReducer) atBulkPath() bool {
	if sr.deeper > 0 {
		return false
	}
	for _, l := range sr.stack {
		if !l.object || l.expectKey {
			return false
		}
	}
	s := sr.stack
	switch {
	case len(s) == 4:
		return s[0].key == keyState && s[1].key == keyChunks && s[3].key == keyData
	case len(s) == 5:
		return s[0].key == keyState && s[1].key == keyGenerations && s[3].key == keyFiles
	}
	return false
}

// swap puts the decoded bytes where their placeholders were decoded.
func (sr *snapReducer) swap(s *State) {
	if s == nil || len(sr.blobs) == 0 {
		return
	}
	for h, c := range s.Chunks {
		if b, ok := sr.blob(c.Data); ok {
			c.Data = b
			s.Chunks[h] = c
		}
	}
	for _, g := range s.Generations {
		for path, f := range g.Files {
			if b, ok := sr.blob(f); ok {
				g.Files[path] = b
			}
		}
	}
}

func (sr *snapReducer) blob(p []byte) ([]byte, bool) {
	if len(p) != 24 || !bytes.Equal(p[:16], sr.nonce[:]) {
		return nil, false
	}
	i := binary.BigEndian.Uint64(p[16:])
	if i >= uint64(len(sr.blobs)) {
		return nil, false
	}
	return sr.blobs[i], true
}
