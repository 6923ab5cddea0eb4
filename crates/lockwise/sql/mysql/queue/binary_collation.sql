-- The server's binary NO PAD collation of utf8mb4, which compares strings byte for byte
-- (trailing spaces included): utf8mb4_nopad_bin on MariaDB 10.2+, utf8mb4_0900_bin on
-- MySQL 8. No row when the server has neither.
SELECT collation_name FROM information_schema.collations
 WHERE collation_name IN ('utf8mb4_nopad_bin', 'utf8mb4_0900_bin')
 ORDER BY collation_name = 'utf8mb4_nopad_bin' DESC
 LIMIT 1
