package raftstore

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Builds before the typed tables kept the leader's records in Experiments
// under name prefixes, written with what are now LegacyPutExperiment and
// LegacyDeleteExperiment. A state from such a build is migrated where it
// enters: a format-1 snapshot on restore (migrateState), an old log entry
// on replay (applyLegacyPut, applyLegacyDelete). Both route a name to the
// command of its table, so the two paths cannot disagree.
const (
	legacySourcePrefix = "sources/"
	legacyBranchPrefix = "branches/"
	legacyPullPrefix   = "pulls/"
	legacyClaimPrefix  = "commands/"
)

func applyLegacyPut(s *State, p LegacyPutExperiment) error {
	typed, err := legacyPut(p.Name, p.Data)
	if err != nil {
		return err
	}
	return applyPayload(s, typed)
}

func applyLegacyDelete(s *State, p LegacyDeleteExperiment) error {
	typed, err := legacyDelete(p.Name)
	if err != nil {
		return err
	}
	return applyPayload(s, typed)
}

// applyPayload applies a typed payload through the dispatch table.
func applyPayload(s *State, p Payload) error {
	c, err := NewCommand(p)
	if err != nil {
		return err
	}
	return handlers[c.Type].apply(s, c.Version, c.Payload)
}

// legacyPut turns an old document into the put of its table. The
// documents were written by the leader's own structs, whose JSON the
// records kept, so they decode leniently.
func legacyPut(name string, data json.RawMessage) (Payload, error) {
	if strings.HasPrefix(name, "policies/") {
		return &PutExperiment{Name: name, Data: data}, nil
	}
	if src, ok := strings.CutPrefix(name, legacySourcePrefix); ok {
		p := &PutSourceStatus{Source: src}
		return p, legacyDecode(name, data, &p.Status)
	}
	if branch, ok := strings.CutPrefix(name, legacyBranchPrefix); ok {
		p := &PutBranch{}
		if err := legacyDecode(name, data, &p.Record); err != nil {
			return nil, err
		}
		return p, sameKey(name, branch, p.Record.Branch)
	}
	if num, ok := strings.CutPrefix(name, legacyPullPrefix); ok {
		p := &PutPull{}
		if err := legacyDecode(name, data, &p.Record); err != nil {
			return nil, err
		}
		return p, sameKey(name, num, strconv.Itoa(p.Record.Number))
	}
	if id, ok := strings.CutPrefix(name, legacyClaimPrefix); ok {
		p := &PutClaim{}
		if err := legacyDecode(name, data, &p.Claim); err != nil {
			return nil, err
		}
		return p, sameKey(name, id, strconv.FormatInt(p.Claim.CommentID, 10))
	}
	return nil, invalid("no table holds %q", clip(name))
}

// legacyDelete turns an old delete into the delete of its table.
func legacyDelete(name string) (Payload, error) {
	if strings.HasPrefix(name, "policies/") {
		return &DeleteExperiment{Name: name}, nil
	}
	if src, ok := strings.CutPrefix(name, legacySourcePrefix); ok {
		return &DeleteSourceStatus{Source: src}, nil
	}
	if branch, ok := strings.CutPrefix(name, legacyBranchPrefix); ok {
		return &DeleteBranch{Branch: branch}, nil
	}
	if num, ok := strings.CutPrefix(name, legacyPullPrefix); ok {
		n, err := strconv.Atoi(num)
		if err != nil {
			return nil, invalid("%q: not a pull request number", clip(name))
		}
		return &DeletePull{Number: n}, nil
	}
	if id, ok := strings.CutPrefix(name, legacyClaimPrefix); ok {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			return nil, invalid("%q: not a comment id", clip(name))
		}
		return &DeleteClaim{CommentID: n}, nil
	}
	return nil, invalid("no table holds %q", clip(name))
}

func legacyDecode(name string, data json.RawMessage, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return invalid("%s: decode: %v", clip(name), err)
	}
	return nil
}

func sameKey(name, key, inRecord string) error {
	if key != inRecord {
		return invalid("%s holds the record of %q", clip(name), clip(inRecord))
	}
	return nil
}

// migrateState moves the leader's records of a format-1 state from
// Experiments to their tables, in name order (deterministic), and drops
// what no table takes: documents that do not decode or validate, which
// the builds that wrote them skipped when reading too. It returns the
// names dropped.
func migrateState(s *State) []string {
	var dropped []string
	for _, name := range slices.Sorted(maps.Keys(s.Experiments)) {
		if experimentName(name) == nil {
			continue
		}
		doc := s.Experiments[name]
		delete(s.Experiments, name)
		p, err := legacyPut(name, doc.Data)
		if err == nil {
			err = applyPayload(s, p) // a bad experiment name fails validation here
		}
		if err != nil {
			dropped = append(dropped, name)
		}
	}
	return dropped
}
