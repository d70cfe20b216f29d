/* log.h: logging with a rank prefix ("[rank 3] ..."), levels from SYNCBENCH_LOG (error|warn|info|debug). */
#ifndef SB_LOG_H
#define SB_LOG_H

enum { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

void log_set_rank(int rank);     /* -1: no prefix */
void log_set_level(int level);
int  log_level(void);
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define LOG_E(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define LOG_W(...) log_msg(LOG_WARN, __VA_ARGS__)
#define LOG_I(...) log_msg(LOG_INFO, __VA_ARGS__)
#define LOG_D(...) do { if (log_level() >= LOG_DEBUG) log_msg(LOG_DEBUG, __VA_ARGS__); } while (0)

#endif
