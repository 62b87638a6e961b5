package raftstore

import (
	"errors"
	"fmt"
	"reflect"
	"syscall"
	"unsafe"

	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// errNoLogMap: the bolt store's layout is not the one dropMappedPages
// knows (another version of raft-boltdb or bbolt); nothing is dropped.
var errNoLogMap = errors.New("raftstore: the raft log's memory map is not reachable in this build")

// dropMappedPages makes the pages of bolt's read-only memory map of the
// raft log non-resident in this process (madvise MADV_DONTNEED). bolt
// writes the file with pwrite and reads it through the map, so every
// entry a node read back (a follower to apply it, the leader to replicate
// it) stays mapped: about 25 MB for the chunks of a 1,000,000-entry list,
// counted in the node's resident memory until bolt happens to remap. The
// pages stay in the kernel's page cache, where bolt's writes put them
// anyway, unmapped and so reclaimable first; a later read faults them back
// in from there or from disk. Neither raft-boltdb nor bbolt exposes the
// map, so it is reached by reflection; a read transaction holds bolt's
// mmap lock, so the map cannot be replaced (remapped when the file grows)
// while it is advised.
func dropMappedPages(bs *raftboltdb.BoltStore) error {
	conn := reflect.ValueOf(bs).Elem().FieldByName("conn")
	if !conn.IsValid() || conn.Type() != reflect.TypeFor[*bbolt.DB]() || conn.IsNil() {
		return errNoLogMap
	}
	db := (*bbolt.DB)(unsafe.Pointer(conn.Pointer()))
	tx, err := db.Begin(false)
	if err != nil {
		return fmt.Errorf("raftstore: dropping the raft log's mapped pages: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	ref := reflect.ValueOf(db).Elem().FieldByName("dataref")
	if !ref.IsValid() || ref.Type() != reflect.TypeFor[[]byte]() {
		return errNoLogMap
	}
	if ref.Len() == 0 {
		return nil
	}
	data := unsafe.Slice((*byte)(unsafe.Pointer(ref.Pointer())), ref.Len())
	if err := syscall.Madvise(data, syscall.MADV_DONTNEED); err != nil {
		return fmt.Errorf("raftstore: dropping the raft log's mapped pages: %w", err)
	}
	return nil
}
