"""Where the tables live: their schemas, paths and Parquet I/O, the output DIR's atomic staging,
the Spark SQL catalog, the generated table docs and the Spark session helper."""
