module stategate

go 1.26

require github.com/alecthomas/kong v1.17.0 // indirect
