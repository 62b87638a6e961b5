//go:build !linux

package raftstore

import raftboltdb "github.com/hashicorp/raft-boltdb/v2"

// dropMappedPages does nothing: only Linux's build advises the map.
func dropMappedPages(*raftboltdb.BoltStore) error { return nil }
