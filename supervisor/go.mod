module trainop/supervisor

go 1.26
