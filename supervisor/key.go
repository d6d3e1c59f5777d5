package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// keyFlag passes the channel's key to the supervisor's second image on a pipe.
const keyFlag = "--key-fd"

// takeKey takes the channel's key out of reach of the rank. The key comes in the
// environment (from the pod's Secret), which a process keeps in its memory for ever, and
// which /proc/PID/environ shows to a process of the same user that may read it (root
// without CAP_SYS_PTRACE, as a container's root is, may): so the supervisor puts the key
// on a pipe and runs itself again without it, and the second image reads it from the pipe
// (--key-fd N) before it starts any child. The rest of args is returned.
func takeKey(args []string) (string, []string, error) {
	if len(args) >= 2 && args[0] == keyFlag {
		fd, err := strconv.Atoi(args[1])
		if err != nil || fd < 3 {
			return "", nil, errors.New(keyFlag + ": not a descriptor")
		}
		f := os.NewFile(uintptr(fd), "key")
		defer f.Close()
		key, err := io.ReadAll(io.LimitReader(f, 1<<10))
		return string(key), args[2:], err
	}
	key := os.Getenv(keyEnv)
	if key == "" {
		return "", args, nil
	}
	return "", nil, moveKey(key, args)
}

// moveKey runs the supervisor again with args, the key on a pipe and not in its
// environment; it returns only where it could not.
func moveKey(key string, args []string) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	if len(key) > 1<<10 {
		return errors.New(keyEnv + ": longer than 1 KiB")
	}
	if _, err := w.WriteString(key); err != nil { // the pipe holds 1 KiB unread
		return err
	}
	w.Close()
	fd := int(r.Fd())
	// os.Pipe's descriptors close on exec: this one is kept for the next image
	if _, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_SETFD, 0); errno != 0 {
		return errno
	}
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, keyEnv+"=") {
			env = append(env, kv)
		}
	}
	argv := append([]string{os.Args[0], keyFlag, strconv.Itoa(fd)}, args...)
	err = syscall.Exec("/proc/self/exe", argv, env)
	return fmt.Errorf("cannot run itself again without the key: %w", err)
}
