CREATE FUNCTION f() RETURNS int AS $body$ SELECT 1; $body$ LANGUAGE sql;
SELECT 'a;b', E'x\';y', "q;";
/* a /* nested */ ; */ SELECT 2;