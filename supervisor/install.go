package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// install copies the running executable to dir/name: written aside and renamed, so a
// container that starts the supervisor never finds half of it.
func install(dir string) int {
	if err := copyExecutable(filepath.Join(dir, name)); err != nil {
		fmt.Fprintf(os.Stderr, "%s: cannot install into %s: %v\n", name, dir, err)
		return 1
	}
	fmt.Printf("%s: installed in %s\n", name, dir)
	return 0
}

func copyExecutable(dest string) error {
	self, err := os.Open("/proc/self/exe")
	if err != nil {
		return err
	}
	defer self.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+name+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone once renamed; left by nothing else
	_, err = io.Copy(tmp, self)
	if err == nil {
		err = tmp.Chmod(0o755)
	}
	if closed := tmp.Close(); err == nil {
		err = closed
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dest)
}
