package main

import (
	"bytes"
	"io"
	"io/fs"
	"os"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// zipFile is a file of a module zip: a file of the work tree, or data in its place (the
// rewritten go.mod).
type zipFile struct {
	name string // path in the module, "/"-separated
	file string // the work tree's file
	data []byte // if not nil, the content instead of file's
}

func (f zipFile) Path() string { return f.name }

func (f zipFile) Lstat() (fs.FileInfo, error) {
	fi, err := os.Lstat(f.file)
	if err != nil || f.data == nil {
		return fi, err
	}
	return dataInfo{fi, int64(len(f.data))}, nil
}

func (f zipFile) Open() (io.ReadCloser, error) {
	if f.data != nil {
		return io.NopCloser(bytes.NewReader(f.data)), nil
	}
	return os.Open(f.file)
}

// dataInfo is a file's info with the size of the data that replaces its content.
type dataInfo struct {
	fs.FileInfo
	size int64
}

func (fi dataInfo) Size() int64 { return fi.size }

// writeZip writes the zip of module m made of files to name, as the go command makes
// module zips (golang.org/x/mod/zip: the paths, sizes and names it allows).
func writeZip(name string, m module.Version, files []zipFile) error {
	zfs := make([]modzip.File, len(files))
	for i, f := range files {
		zfs[i] = f
	}
	w, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := modzip.Create(w, m, zfs); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}
