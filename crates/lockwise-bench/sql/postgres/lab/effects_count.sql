-- How many effects landed.
SELECT count(*) FROM {schema}.lab_effects
