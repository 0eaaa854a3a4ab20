//go:build linux && !sqm_noweb

package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"sqm/internal/web"
)

// passwdInput is where sqm passwd reads the password; tests replace it.
var passwdInput io.Reader = os.Stdin

func cmdPasswd() *command {
	return &command{
		name:    "passwd",
		summary: "add a login (password or token) for the daemon's web page",
		usage:   "sqm passwd [--users FILE] [--role admin|read] [--token]",
		help: `Reads a password from standard input (one line) and adds a line with its
salted PBKDF2-SHA256 hash to the users file 'sqm daemon' reads (its
http-users flag; created mode 600), or prints the line when --users is "-"
(a --token then goes to standard error).
--token makes a random 32-character token instead, prints it once and
stores only its hash: paste it into the page's login field, or keep it in
a password manager. --role read makes a login that sees everything and
changes nothing. Remove a login by deleting its line; the daemon reads the
file at start.

Example:

  $ sqm passwd --users /etc/sqm/web-users --token
  token (admin): 3q2-7Xd0...`,
		flags: func(fs *flag.FlagSet) {
			fs.String("users", "/etc/sqm/web-users", "the users file to add to (- prints the line)")
			fs.String("role", "admin", "admin (change settings, run tests) or read (read-only)")
			fs.Bool("token", false, "generate a random token instead of reading a password")
		},
		run: func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
			if len(args) > 0 {
				return usageError("passwd takes no arguments")
			}
			role := flagString(fs, "role")
			if role != string(web.RoleAdmin) && role != string(web.RoleRead) {
				return usageError("--role %q: use admin or read", role)
			}
			var pw string
			if flagBool(fs, "token") {
				pw = web.NewToken()
			} else {
				line, err := bufio.NewReader(passwdInput).ReadString('\n')
				if err != nil && !errors.Is(err, io.EOF) {
					return err
				}
				pw = strings.TrimRight(line, "\r\n")
				if len(pw) < 8 {
					return errors.New("password too short: use at least 8 characters (or --token)")
				}
			}
			hash, err := web.HashPassword(pw)
			if err != nil {
				return err
			}
			entry := role + " " + hash + "\n"
			path := flagString(fs, "users")
			if path == "-" {
				// Stdout is the users line alone (it is meant for a
				// redirect into the file); a token is shown once, on
				// stderr, or nobody would ever learn it.
				if flagBool(fs, "token") {
					fmt.Fprintf(env.Stderr, "token (%s): %s\n", role, pw)
				}
				_, err := io.WriteString(env.Stdout, entry)
				return err
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return err
			}
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
			if err != nil {
				return err
			}
			if _, err := f.WriteString(entry); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			if flagBool(fs, "token") {
				fmt.Fprintf(env.Stdout, "token (%s): %s\n", role, pw)
			} else {
				fmt.Fprintf(env.Stdout, "added a login with role %s to %s\n", role, path)
			}
			return nil
		},
	}
}
