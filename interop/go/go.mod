module ninep/interop

go 1.22

require (
	9fans.net/go v0.0.7
	github.com/hugelgupf/p9 v0.4.1
	github.com/lionkov/go9p v0.0.0-20190125202718-b4200817c487
)

require (
	github.com/u-root/uio v0.0.0-20230305220412-3e8cd9d6bf63 // indirect
	golang.org/x/sys v0.15.0 // indirect
)
