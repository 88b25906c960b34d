module stategate

go 1.26
