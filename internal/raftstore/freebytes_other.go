//go:build !linux && !darwin

package raftstore

func freeBytes(string) (uint64, error) { return 0, errFreeSpaceUnsupported }
